package journaltest

import (
	"bytes"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/fold"
)

// testRestate: a decision record restated by an erasure (core.Restater)
// reads back redacted, in its place, with the restatement as its payload:
// the ids and decision stay, the erased text is gone from the row, the
// fold still knows the approval and who decided it, and the chain verifies.
// A restatement the record does not name, or of a conversation kind, is
// refused and changes nothing.
func testRestate(t *testing.T, f *fixture) {
	rs, ok := f.j.(core.Restater)
	if !ok {
		t.Fatalf("%T does not implement core.Restater", f.j)
	}
	ctx := t.Context()
	const secret = "wire 400 euros to Dana's private account"
	sc := scope("restate")
	ch := sc.Key()
	req, err := f.bd.Agent("run-r", sc, core.Meta{}, &core.ApprovalRequested{
		ApprovalID: "ap1", CallID: "c1", Tool: "pay", Summary: "pay: " + secret, Requester: "UALICE",
		ExpiresAt: time.Unix(1700000000, 0).UTC(), Reason: "quotes " + secret,
	})
	if err != nil {
		t.Fatal(err)
	}
	res, err := f.bd.Human(core.Person{ID: "UBOB"}, sc, core.Meta{Run: "run-r"}, &core.ApprovalResolved{ApprovalID: "ap1", Decision: "approved", By: core.Person{ID: "UBOB"}})
	if err != nil {
		t.Fatal(err)
	}
	msg := f.msg("restate", secret)
	cmds := f.append(req, res, msg)
	restated, changed, err := core.Restate(cmds[0], []string{secret})
	if err != nil || !changed || bytes.Contains(restated, []byte("Dana")) {
		t.Fatalf("restate: %s %v %v", restated, changed, err)
	}
	record := func(target core.Command, hash string) core.Draft {
		d, err := f.bd.System("operator", sc, core.Meta{Cause: target.ID()},
			&core.CommandRedacted{Seq: target.Seq(), ID: target.ID(), Reason: "forget", TargetKind: target.Kind().String(), Restated: hash})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	// Refused: a record naming another hash, and a message (erasable: redact it).
	if _, err := rs.Restate(ctx, 1, restated, record(cmds[0], core.RestatementHash([]byte(`{}`)))); err == nil {
		t.Fatal("a restatement the record does not name was accepted")
	}
	if _, err := rs.Restate(ctx, 3, restated, record(cmds[2], core.RestatementHash(restated))); err == nil {
		t.Fatal("a message.received was restated")
	}
	if seq, _ := f.head(ch); seq != 3 {
		t.Fatalf("refused restatements moved the head to %d", seq)
	}
	marker, err := rs.Restate(ctx, 1, restated, record(cmds[0], core.RestatementHash(restated)))
	if err != nil {
		t.Fatalf("restate: %v", err)
	}
	if marker.Seq() != 4 || marker.Kind() != core.KindCommandRedacted {
		t.Fatalf("restatement record: %s", marker)
	}
	check := func(c core.Command) {
		t.Helper()
		if !c.Redacted() || !c.Restated() || c.Hash() != cmds[0].Hash() {
			t.Fatalf("seq 1 after restatement: redacted %v restated %v", c.Redacted(), c.Restated())
		}
		if bytes.Contains(c.RawPayload(), []byte("Dana")) {
			t.Fatalf("restated payload holds the text: %s", c.RawPayload())
		}
		p, err := core.Decode[*core.ApprovalRequested](c)
		if err != nil || p.Summary != core.ErasedText || p.Reason != core.ErasedText || p.Requester != "UALICE" || p.Tool != "pay" || !p.ExpiresAt.Equal(time.Unix(1700000000, 0)) {
			t.Fatalf("restated payload: %+v %v", p, err)
		}
	}
	got := f.read(ch, 1, 0)
	check(got[0])
	run, err := f.j.ReadRun(ctx, "run-r")
	if err != nil || len(run) == 0 {
		t.Fatalf("read run: %d %v", len(run), err)
	}
	check(run[0])
	if stored, err := f.h.Tamper.StoredPayload(ctx, ch, 1); err != nil || bytes.Contains(stored, []byte("Dana")) {
		t.Fatalf("stored payload column after restatement: %q %v", stored, err)
	}
	f.verify(ch, 4)
	st := fold.NewChannel(ch)
	for _, c := range got {
		if err := st.Apply(c); err != nil {
			t.Fatal(err)
		}
	}
	if a := st.Approval("ap1"); a == nil || a.Decision != "approved" || a.By.ID != "UBOB" || a.Requester != "UALICE" || a.Summary != core.ErasedText {
		t.Fatalf("fold after restatement: %+v", a)
	}
	if _, err := rs.Restate(ctx, 1, restated, record(got[0], core.RestatementHash(restated))); err == nil {
		t.Fatal("a restated command was restated again")
	}
}
