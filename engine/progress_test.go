package engine_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/coretest"
	"github.com/marlowe-bot/marlowe/engine"
)

// A long call's progress (ToolContext.Progress; a connector passes its
// server's notifications/progress on) shows on the run's checklist while
// the call runs, the latest each time, and is gone once the run is done.
// On the old code ToolContext had no Progress: nothing showed until the
// call ended.
func TestToolProgressShowsOnTheChecklistWhileTheCallRuns(t *testing.T) {
	var h *harness
	sawEdit := func(want string) bool {
		for _, e := range h.s.Edits() {
			if strings.Contains(e.Out.Text, want) {
				return true
			}
		}
		return false
	}
	slow := core.Tool{Name: "slow_copy", Description: "copies slowly", Consequence: core.Read,
		Schema: json.RawMessage(`{"type":"object"}`),
		Run: func(_ context.Context, tc core.ToolContext, _ json.RawMessage) (core.Observation, error) {
			if tc.Progress == nil {
				return core.Observation{}, nil
			}
			tc.Progress(core.Progress{Done: 1, Total: 3, Message: "copying  part\n1"})
			coretest.WaitFor(t, 20*time.Second, "the first progress on the checklist", func() bool { return sawEdit("… slow copy — 1 of 3: copying part 1") })
			tc.Progress(core.Progress{Done: 2.5, Message: "still going"})
			coretest.WaitFor(t, 20*time.Second, "the latest progress on the checklist", func() bool { return sawEdit("… slow copy — 2.5 done: still going") })
			return core.Observation{Text: "copied"}, nil
		}}
	m := coretest.NewScriptedModel(coretest.Calls(coretest.Call("c1", "slow_copy", `{}`)), coretest.Text("done"))
	h = newHarness(t, m, []core.Tool{slow}, func(cfg *engine.Config) { cfg.DefaultPolicy = core.Policy{Tools: []string{"slow_copy"}} })
	h.deliver(h.mention(alice, "C1", "copy it"))
	h.idle()
	if !sawEdit("2.5 done") {
		t.Fatalf("progress never shown; edits %+v", h.s.Edits())
	}
	edits := h.s.Edits()
	last := edits[len(edits)-1].Out.Text
	if strings.Contains(last, "… slow copy") || !strings.Contains(last, "✓ slow copy") {
		t.Errorf("finished run's checklist still shows the running call: %q", last)
	}
}
