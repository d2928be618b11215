package coretest_test

import (
	"errors"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/coretest"
)

// A restatement is bound by the signed record that names its hash: editing
// the restated bytes behind the journal's back fails verification at the
// restated seq, as a silent redaction does.
func TestRestatementEditFailsVerify(t *testing.T) {
	ctx := t.Context()
	signer := coretest.NewSigner(t)
	j := coretest.NewMemJournal(signer)
	bd := core.NewBoundary(time.Now)
	sc := core.Scope{Platform: "test", Channel: "C1"}
	req, err := bd.Agent("run-1", sc, core.Meta{}, &core.ApprovalRequested{ApprovalID: "a1", Tool: "pay", Summary: "pay the secret vendor 40", Requester: "U1"})
	if err != nil {
		t.Fatal(err)
	}
	cmds, err := j.Append(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	restated, changed, err := core.Restate(cmds[0], []string{"secret vendor"})
	if err != nil || !changed {
		t.Fatalf("restate: %v %v", changed, err)
	}
	rec, err := bd.System("operator", sc, core.Meta{}, &core.CommandRedacted{Seq: 1, ID: cmds[0].ID(), Reason: "forget", Restated: core.RestatementHash(restated)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j.Restate(ctx, 1, restated, rec); err != nil {
		t.Fatal(err)
	}
	if _, err := core.VerifyChannel(ctx, j, signer.Verifier(), sc.Key()); err != nil {
		t.Fatalf("verify after restatement: %v", err)
	}
	if err := j.Tamper().FlipPayloadByte(ctx, sc.Key(), 1, 3); err != nil {
		t.Fatal(err)
	}
	_, err = core.VerifyChannel(ctx, j, signer.Verifier(), sc.Key())
	var ce *core.ChainError
	if !errors.As(err, &ce) || ce.Seq != 1 {
		t.Fatalf("verify after editing the restatement: %v, want a chain error at seq 1", err)
	}
}
