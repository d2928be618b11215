package engine

import (
	"crypto/ed25519"
	"crypto/rand"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/fold"
)

// The histories on which the engine's cache and `bot replay`'s fold used
// to disagree (before they became one fold): two grants of one tool and
// destination with one revoked by id; a card decided and then expired
// late; a run with two cards, one decided. The replay must report what
// the engine acts on: the second grant stands, the first decision stands,
// the run still waits for its other card.
func TestFoldUsesTheEnginesConsentAndApprovalRules(t *testing.T) {
	b := core.NewBoundary(func() time.Time { return time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC) })
	s := testSigner(t)
	var cmds []core.Command
	add := func(run string, p core.Payload) {
		d, err := b.System("test", testScope, core.Meta{Run: run}, p)
		if err != nil {
			t.Fatal(err)
		}
		c, err := s.Seal(d, uint64(len(cmds)+1), core.Hash{})
		if err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, c)
	}
	add("", &core.ConsentGranted{ConsentID: "K1", Tool: "post", Destination: "#a", Owner: "UA"})
	add("", &core.ConsentGranted{ConsentID: "K2", Tool: "post", Destination: "#a", Owner: "UA"})
	add("", &core.ConsentRevoked{ConsentID: "K1", Tool: "post", Destination: "#a", Owner: "UA"})
	add("R1", &core.RunStarted{Trigger: "M1"})
	add("R1", &core.ApprovalRequested{ApprovalID: "A1", Tool: "post"})
	add("R1", &core.ApprovalRequested{ApprovalID: "A2", Tool: "post"})
	add("R1", &core.ApprovalResolved{ApprovalID: "A1", Decision: "approved", By: core.Person{ID: "UB"}})
	add("R1", &core.ApprovalResolved{ApprovalID: "A1", Decision: "expired"})

	st, err := fold.Fold(testScope.Key(), cmds)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Consents) != 1 || st.Consents[0].ID != "K2" || st.Consents[0].Tool != "post" || st.Consents[0].Destination != "#a" {
		t.Errorf("consents = %+v, want K2 standing (K1 revoked by id)", st.Consents)
	}
	if a := st.Approvals["A1"]; a.Decision != "approved" || a.By != "UB" {
		t.Errorf("A1 = %+v, want approved by UB (a late expiry changes nothing)", a)
	}
	if a := st.Approvals["A2"]; a.Decision != "pending" {
		t.Errorf("A2 = %+v, want pending", a)
	}
	if r := st.Runs["R1"]; r.Status != core.RunWaitingApproval {
		t.Errorf("R1 = %s, want %s (A2 still pending)", r.Status, core.RunWaitingApproval)
	}

	// The engine's cache, fed the same commands, acts on the same facts.
	v := newChanView(testScope.Key(), nil)
	for _, c := range cmds {
		if err := v.apply(c); err != nil {
			t.Fatal(err)
		}
	}
	if !v.fold.Consented("post", "#a", []string{"UA"}) || v.fold.Approval("A1").Decision != "approved" || v.fold.Run("R1").Status != core.RunWaitingApproval {
		t.Errorf("engine: consented %v, A1 %q, R1 %s", v.fold.Consented("post", "#a", []string{"UA"}), v.fold.Approval("A1").Decision, v.fold.Run("R1").Status)
	}
	add("", &core.ConsentRevoked{ConsentID: "K2", Tool: "post", Destination: "#a", Owner: "UA"})
	if err := v.apply(cmds[len(cmds)-1]); err != nil {
		t.Fatal(err)
	}
	if st, _ := fold.Fold(testScope.Key(), cmds); len(st.Consents) != 0 || v.fold.Consented("post", "#a", []string{"UA"}) {
		t.Errorf("after revoking K2: replay %+v, engine consented %v", st.Consents, v.fold.Consented("post", "#a", []string{"UA"}))
	}
}

// A card decided while its run is paused for another reason (blocked)
// does not put the run back to work: not in the channel's fold, and not in
// the run's own fold the driver resumes from (which used to say working).
func TestFoldDecidedCardLeavesABlockedRunBlocked(t *testing.T) {
	b := core.NewBoundary(func() time.Time { return time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC) })
	s := testSigner(t)
	var cmds []core.Command
	for _, p := range []core.Payload{
		&core.RunStarted{Trigger: "M1"},
		&core.ApprovalRequested{ApprovalID: "A1", Tool: "post"},
		&core.RunPaused{Status: core.RunBlocked, Reason: "the model is unavailable"},
		&core.ApprovalResolved{ApprovalID: "A1", Decision: "approved", By: core.Person{ID: "UB"}},
	} {
		d, err := b.System("test", testScope, core.Meta{Run: "R1"}, p)
		if err != nil {
			t.Fatal(err)
		}
		c, err := s.Seal(d, uint64(len(cmds)+1), core.Hash{})
		if err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, c)
	}
	st, err := fold.Fold(testScope.Key(), cmds)
	if err != nil {
		t.Fatal(err)
	}
	rs, err := ReplayRun(cmds)
	if err != nil {
		t.Fatal(err)
	}
	if st.Runs["R1"].Status != core.RunBlocked || rs.Status != core.RunBlocked {
		t.Fatalf("channel fold %s, run replay %s: want both %s", st.Runs["R1"].Status, rs.Status, core.RunBlocked)
	}
}

func testSigner(t testing.TB) *core.Signer {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := core.NewSigner(priv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var testScope = core.Scope{Platform: "slack", Workspace: "T1", Channel: "C1"}
