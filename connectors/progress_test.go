package connectors

import (
	"context"
	"encoding/json"
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
	got := make(chan core.Progress, 16)
	obs, err := tool.Run(context.Background(), core.ToolContext{Progress: func(p core.Progress) { got <- p }}, json.RawMessage(`{}`))
	if err != nil || obs.Text != "finished" {
		t.Fatalf("call: %+v %v", obs, err)
	}
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
	obs, err = tool.Run(context.Background(), core.ToolContext{}, json.RawMessage(`{}`))
	if err != nil || obs.Text != "no progress token" {
		t.Errorf("a call nobody watches carried a token: %+v %v", obs, err)
	}
}
