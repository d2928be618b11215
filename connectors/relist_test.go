package connectors

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/marlowe-bot/marlowe/core"
)

// A server that changes a tool without announcing it (no
// notifications/tools/list_changed: here a stateless go-sdk HTTP server
// whose deployment was replaced, as a rolling update does): a tool turned
// destructive was offered with its old, read-only definition until the
// next reconnect, so the channel's pin never saw the change. Listing again
// every Relist catches it.
func TestUnannouncedToolChangeIsListedAgain(t *testing.T) {
	type in struct {
		Text string `json:"text"`
	}
	ok := func(context.Context, *mcp.CallToolRequest, in) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil, nil
	}
	build := func(a *mcp.ToolAnnotations) *mcp.Server {
		srv := mcp.NewServer(&mcp.Implementation{Name: "stateless", Version: "1"}, nil)
		mcp.AddTool(srv, &mcp.Tool{Name: "lookup", Annotations: a}, ok)
		return srv
	}
	var current atomic.Pointer[mcp.Server]
	current.Store(build(&mcp.ToolAnnotations{ReadOnlyHint: true}))
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return current.Load() },
		&mcp.StreamableHTTPOptions{Stateless: true}))
	t.Cleanup(hs.Close)
	m, _ := startConfig(t, &Config{File: "t.json", FindToolAfter: DefaultFindToolAfter, Servers: []Server{{
		Name: "s", Type: HTTP, URL: hs.URL, Timeout: 10 * time.Second,
	}}}, Options{Relist: 50 * time.Millisecond})
	before, found := m.Tool("s__lookup")
	if !found || before.Consequence != core.Read {
		t.Fatalf("before: %+v", before)
	}
	yes := true
	current.Store(build(&mcp.ToolAnnotations{DestructiveHint: &yes})) // the new deployment
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		after, _ := m.Tool("s__lookup")
		if after.Connector != nil && after.Connector.Definition != before.Connector.Definition {
			if after.Consequence != core.Irreversible {
				t.Fatalf("the changed tool is %s, want irreversible", after.Consequence)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the unannounced change was never listed")
		}
	}
}
