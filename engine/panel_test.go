package engine_test

import (
	"context"
	"testing"

	"github.com/marlowe-bot/marlowe/core"
)

// The assistant panel's hints come from the journal: the decision waiting
// for an approver, the request its requester made, a routine's report for
// its owner only; and they say the same after a restart.
func TestPanelHintsFollowWhatWaits(t *testing.T) {
	h, _, _ := approversHarness(t)
	n := skipNotice(h, 1)
	notifyOwner(t, h.e, n)
	hints := func(p core.Person) core.PanelHints {
		t.Helper()
		got, err := h.e.PanelHints(context.Background(), platform, p.ID)
		if err != nil {
			t.Fatalf("panel hints of %s: %v", p.ID, err)
		}
		return got
	}
	for round := range 2 {
		if got, want := hints(carol), (core.PanelHints{Decisions: 1}); got != want {
			t.Errorf("round %d: carol (an approver) %+v, want %+v", round, got, want)
		}
		if got, want := hints(alice), (core.PanelHints{Reports: 1, Report: n.Title, Asked: 1}); got != want {
			t.Errorf("round %d: alice (requester, routine owner) %+v, want %+v", round, got, want)
		}
		if got := hints(core.Person{ID: "UNOBODY"}); got != (core.PanelHints{}) {
			t.Errorf("round %d: a stranger %+v", round, got)
		}
		h.restart()
	}
}
