package connectors

import (
	"context"
	"fmt"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/marlowe-bot/marlowe/core"
)

// progressRoutes sends a server's notifications/progress to the call that
// carries their token. A notification whose token no running call holds
// (late, or made up by the server) is dropped.
type progressRoutes struct {
	mu   sync.Mutex
	next uint64
	to   map[string]func(core.Progress)
}

// open gives a call a fresh token routed to report, and the func that
// closes the route when the call ends.
func (p *progressRoutes) open(report func(core.Progress)) (string, func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.next++
	tok := fmt.Sprintf("marlowe-%d", p.next)
	if p.to == nil {
		p.to = map[string]func(core.Progress){}
	}
	p.to[tok] = report
	return tok, func() {
		p.mu.Lock()
		delete(p.to, tok)
		p.mu.Unlock()
	}
}

// handle is the client's ProgressNotificationHandler.
func (p *progressRoutes) handle(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
	if req == nil || req.Params == nil {
		return
	}
	tok, ok := req.Params.ProgressToken.(string)
	if !ok {
		return
	}
	p.mu.Lock()
	report := p.to[tok]
	p.mu.Unlock()
	if report != nil {
		// The server's words: the harness shows them as data, shortened.
		report(core.Progress{Done: req.Params.Progress, Total: req.Params.Total, Message: core.Truncate(req.Params.Message, 200)})
	}
}
