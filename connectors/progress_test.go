package connectors

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
)

// A server's notifications/progress with the call's progress token reach
// that call's ToolContext.Progress, in order; a call without a Progress
// callback sends no token. On the old code no token was sent (the server
// answered "no progress token") and nothing was reported.
func TestProgressNotificationsReachTheCall(t *testing.T) {
	m, _ := start(t, map[string]map[string]string{"t": nil}, Options{})
	tool, ok := m.Tool("t__progress")
	if !ok {
		t.Fatal("no t__progress")
	}
	obs, err := tool.Run(context.Background(), core.ToolContext{Progress: func(core.Progress) {}}, json.RawMessage(`{}`))
	if err != nil || obs.Text != "finished" {
		t.Fatalf("call: %+v %v", obs, err)
	}
	// A report handled after its call returned is dropped (the route is
	// closed), so the order is checked on a call held open until all three
	// arrived; the test then cancels it.
	got := make(chan core.Progress, 16)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ended := make(chan error, 1)
	go func() {
		_, err := tool.Run(ctx, core.ToolContext{Progress: func(p core.Progress) { got <- p }}, json.RawMessage(`{"text":"hold"}`))
		ended <- err
	}()
	for i := 1; i <= 3; i++ {
		select {
		case p := <-got:
			if p.Done != float64(i) || p.Total != 3 || p.Message != "step "+string(rune('0'+i)) {
				t.Errorf("progress %d = %+v", i, p)
			}
		case <-time.After(20 * time.Second): // an event awaited, not a timing
			t.Fatalf("progress %d never arrived", i)
		}
	}
	cancel()
	if err := <-ended; err == nil {
		t.Error("the held call ended without an error after it was cancelled")
	}
	obs, err = tool.Run(context.Background(), core.ToolContext{}, json.RawMessage(`{}`))
	if err != nil || obs.Text != "no progress token" {
		t.Errorf("a call nobody watches carried a token: %+v %v", obs, err)
	}
}

// A server that asks, during a call, for input from a person
// (elicitation) or from Marlowe's model (sampling) is refused: the call
// fails with an error that says so, and nothing is shown to anyone.
// Marlowe advertises neither capability and has no handler for either.
// (On the current protocol the ask is an input request in the call's
// result; the go-sdk client answers it with our handlers, which are none.)
func TestSamplingAndElicitationAreRefused(t *testing.T) {
	m, _ := start(t, map[string]map[string]string{"t": nil}, Options{})
	for _, c := range []struct{ ask, want string }{
		{"elicit", "asked for input from a person (MCP elicitation), which Marlowe does not support yet: it declined"},
		{"sample", "asked Marlowe's model for a completion (MCP sampling), which Marlowe never provides: it declined"},
	} {
		obs, err := call(t, context.Background(), m, "t__ask", `{"text":"`+c.ask+`"}`)
		if !errors.Is(err, ErrAsked) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %+v %v, want a refusal naming %q", c.ask, obs, err, c.want)
		}
		t.Logf("%s: %v", c.ask, err)
	}
}
