package memory_test

import (
	"strings"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
)

// `forget me` strips the person's texts from approval and audit records
// without losing who decided what: an approval that quoted Alice's message
// (its summary and the gate's reason) and the gate decision quoting it are
// restated. No row of any table holds her words afterwards; the journal
// still holds the approval with its requester, tool, decider and decision
// (the fold knows them); the chains verify; the reply says what happened to
// those records.
func TestEngineForgetMeStripsDecisionRecords(t *testing.T) {
	r := newForgetRig(t)
	const said = "post the heliotrope launch date to the partners"
	r.say("C1", "UALICE", said)
	sc := core.Scope{Platform: "test", Workspace: "W", Channel: "C1"}
	exp := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	var drafts []core.Draft
	add := func(d core.Draft, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		drafts = append(drafts, d)
	}
	add(r.b.Agent("run-ap", sc, core.Meta{}, &core.PermissionDecided{CallID: "c1", Tool: "post_message", Decision: "ask", Reason: "asked to " + said}))
	add(r.b.Agent("run-ap", sc, core.Meta{}, &core.ApprovalRequested{ApprovalID: "ap-1", CallID: "c1", Tool: "post_message",
		Consequence: "external", Summary: "post_message: " + said, Requester: "UALICE", ExpiresAt: exp, Reason: "quoting: " + said}))
	add(r.b.Human(core.Person{ID: "UBOB"}, sc, core.Meta{Run: "run-ap"}, &core.ApprovalResolved{ApprovalID: "ap-1", Decision: "declined", By: core.Person{ID: "UBOB"}}))
	add(r.b.Agent("run-ap", sc, core.Meta{}, &core.RunCompleted{}))
	if _, err := r.store.Append(t.Context(), drafts...); err != nil {
		t.Fatal(err)
	}
	if got := r.sqlHolding("heliotrope"); len(got) < 3 {
		t.Fatalf("the scenario keeps too little of Alice's text to test: %v", got)
	}

	r.say("DALICE", "UALICE", "forget me")
	reply := r.click("DALICE", "UALICE", r.card("DALICE"), "erase")
	for _, want := range []string{"approval and audit records that quoted one of your texts", "1 approval request", "1 permission decision", "`[erased]`"} {
		if !strings.Contains(reply, want) {
			t.Errorf("the reply lacks %q:\n%s", want, reply)
		}
	}
	if got := r.sqlHolding("heliotrope", "partners"); len(got) > 0 {
		t.Errorf("after forget me, rows still hold Alice's text:\n%s", strings.Join(got, "\n"))
	}
	cmds, err := r.store.Read(t.Context(), sc.Key(), 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	var req *core.ApprovalRequested
	var res *core.ApprovalResolved
	for _, c := range cmds {
		switch c.Kind() {
		case core.KindApprovalRequested:
			if !c.Restated() {
				t.Errorf("approval.requested is not restated (redacted %v)", c.Redacted())
			}
			req, err = core.Decode[*core.ApprovalRequested](c)
		case core.KindApprovalResolved:
			res, err = core.Decode[*core.ApprovalResolved](c)
		}
		if err != nil {
			t.Fatalf("decode %s: %v", c, err)
		}
	}
	if req == nil || req.ApprovalID != "ap-1" || req.Requester != "UALICE" || req.Tool != "post_message" ||
		req.Consequence != "external" || !req.ExpiresAt.Equal(exp) || req.Summary != core.ErasedText || req.Reason != core.ErasedText {
		t.Errorf("restated approval.requested: %+v", req)
	}
	if res == nil || res.By.ID != "UBOB" || res.Decision != "declined" {
		t.Errorf("approval.resolved: %+v", res)
	}
	r.verify()
}

// `delete memory` restates the approval records that quote the note, as
// `forget me` does: no row holds it afterwards, the approval keeps its
// requester and decision, the chain verifies, and the reply says so.
func TestEngineDeleteMemoryStripsDecisionRecords(t *testing.T) {
	r := newForgetRig(t)
	const note = "the heliotrope launch date is march third"
	r.say("C1", "UALICE", "remember "+note)
	got, err := r.svc.For("test/W/C1").ListMemories(t.Context(), 0, 10)
	if err != nil || len(got) != 1 {
		t.Fatalf("memories: %+v %v", got, err)
	}
	sc := core.Scope{Platform: "test", Workspace: "W", Channel: "C1"}
	req, err := r.b.Agent("run-ap", sc, core.Meta{}, &core.ApprovalRequested{ApprovalID: "ap-2", CallID: "c9", Tool: "post_message",
		Summary: "post_message: " + note, Requester: "UALICE", ExpiresAt: time.Now().Add(time.Hour).UTC()})
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.b.Human(core.Person{ID: "UBOB"}, sc, core.Meta{Run: "run-ap"}, &core.ApprovalResolved{ApprovalID: "ap-2", Decision: "approved", By: core.Person{ID: "UBOB"}})
	if err != nil {
		t.Fatal(err)
	}
	done, err := r.b.Agent("run-ap", sc, core.Meta{}, &core.RunCompleted{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.store.Append(t.Context(), req, res, done); err != nil {
		t.Fatal(err)
	}
	reply := r.say("C1", "UALICE", "delete memory "+got[0].ID)
	if !strings.Contains(reply, "Approval and audit records that quoted it") || !strings.Contains(reply, "1 approval request") || strings.Contains(reply, "Still holding") {
		t.Errorf("the delete's reply:\n%s", reply)
	}
	if hits := r.sqlHolding("heliotrope"); len(hits) > 0 {
		t.Errorf("after delete memory, rows still hold the note:\n%s", strings.Join(hits, "\n"))
	}
	cmds, err := r.store.Read(t.Context(), sc.Key(), 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cmds {
		if c.Kind() != core.KindApprovalRequested {
			continue
		}
		p, err := core.Decode[*core.ApprovalRequested](c)
		if err != nil || !c.Restated() || p.Requester != "UALICE" || p.ApprovalID != "ap-2" || p.Summary != core.ErasedText {
			t.Errorf("approval.requested after delete memory: restated %v %+v %v", c.Restated(), p, err)
		}
	}
	r.verify()
}
