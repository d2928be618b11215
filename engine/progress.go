package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"github.com/marlowe-bot/marlowe/core"
)

// A long tool call shows it is alive: the tool reports progress through
// ToolContext.Progress (a connector passes on its server's progress
// notifications) and the checklist's line for the running call shows the
// latest. Progress is cosmetic and not journaled: a resumed run shows none
// until the call reports again.

// runningCall is the call a run is waiting on and its latest progress.
type runningCall struct {
	tool string
	p    core.Progress
}

func (r *runningCall) line() string {
	var b strings.Builder
	b.WriteString("… " + toolLabel(r.tool) + " — ")
	switch {
	case r.p.Total > 0:
		fmt.Fprintf(&b, "%s of %s", num(r.p.Done), num(r.p.Total))
	default:
		fmt.Fprintf(&b, "%s done", num(r.p.Done))
	}
	if m := strings.Join(strings.Fields(r.p.Message), " "); m != "" {
		b.WriteString(": " + core.Truncate(m, 80))
	}
	return b.String()
}

func num(f float64) string {
	return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.2f", f), "0"), ".")
}

// progressFeed coalesces a tool's reports to the latest: a server may
// report far faster than a platform takes edits.
type progressFeed struct {
	mu     sync.Mutex
	latest core.Progress
	signal chan struct{}
}

func (f *progressFeed) report(p core.Progress) {
	f.mu.Lock()
	f.latest = p
	f.mu.Unlock()
	select {
	case f.signal <- struct{}{}:
	default: // an edit is already due: it will read the latest
	}
}

// runWatched runs the tool on its own goroutine while the driver edits the
// checklist with the tool's latest progress. A tool may post through
// tc.Surface meanwhile, which touches the run's state too: the driver
// holds that surface's lock while it edits, so the two never overlap.
func (d *driver) runWatched(ctx, tctx context.Context, tool core.Tool, tc core.ToolContext, raw json.RawMessage) (core.Observation, error) {
	feed := &progressFeed{signal: make(chan struct{}, 1)}
	tc.Progress = feed.report
	type result struct {
		obs core.Observation
		err error
	}
	done := make(chan result, 1)
	go func() {
		obs, err := runTool(tctx, tool, tc, raw)
		done <- result{obs, err}
	}()
	defer func() { d.rs.running = nil }() // the tool has returned: nothing else touches it
	for {
		select {
		case r := <-done:
			return r.obs, r.err
		case <-feed.signal:
			feed.mu.Lock()
			p := feed.latest
			feed.mu.Unlock()
			d.showProgress(ctx, tc, &runningCall{tool: tool.Name, p: p})
		}
	}
}

func (d *driver) showProgress(ctx context.Context, tc core.ToolContext, r *runningCall) {
	if ts, ok := tc.Surface.(*toolSurface); ok {
		ts.mu.Lock()
		defer ts.mu.Unlock()
	}
	d.rs.running = r
	if err := d.syncChecklist(ctx, d.rs.Status); err != nil && ctx.Err() == nil {
		d.e.log.WarnContext(ctx, "showing a tool's progress failed", "run", d.rs.ID, "tool", r.tool, "error", err)
	}
}
