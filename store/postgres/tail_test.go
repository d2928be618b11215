package postgres_test

import (
	"testing"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/coretest"
	"github.com/marlowe-bot/marlowe/internal/testpg"
)

// PostgreSQL settles failed runs in SQL (the fold's rule and
// core.EffectID's sha256): Unfinished returns the run.failed of a run that
// owes its end notice and nothing of runs that do not, so start-up does not
// read every failed run of the journal's history.
func TestUnfinishedSettlesFailedRuns(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := open(t, testpg.Pooled(testpg.New(t), 4), coretest.NewSigner(t))
	b := core.NewBoundary(nil)
	sc := core.Scope{Platform: "slack", Workspace: "T1", Channel: "C1", Thread: "M1"}
	appendRun := func(run string, p core.Payload) core.Command {
		t.Helper()
		st, err := b.Agent(run, sc, core.Meta{}, &core.RunStarted{Trigger: "M1"})
		if err != nil {
			t.Fatal(err)
		}
		f, err := b.Agent(run, sc, core.Meta{}, p)
		if err != nil {
			t.Fatal(err)
		}
		cmds, err := s.Append(ctx, st, f)
		if err != nil {
			t.Fatal(err)
		}
		return cmds[1]
	}
	post := func(run, key string) {
		t.Helper()
		d, err := b.Agent(run, sc, core.Meta{}, &core.MessagePosted{EffectID: key, MessageID: "B-" + key, Role: core.RoleNotice, Text: "❌"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Append(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	owed := appendRun("r-owed", &core.RunFailed{Status: core.RunBroken, Cause: "boom"})
	post("r-owed", "some-other-post") // a post that is not the end notice
	paid := appendRun("r-paid", &core.RunFailed{Status: core.RunCancelled, Cause: "stopped by Ann"})
	post("r-paid", core.EffectID(sc.Key(), paid.Seq(), 0))
	appendRun("r-sup", &core.RunFailed{Status: core.RunCancelled, Cause: "superseded by a new message in the thread"})
	owedCancel := appendRun("r-owed-cancel", &core.RunFailed{Status: core.RunCancelled, Cause: "stopped by Ann"})

	got, err := s.Unfinished(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, c := range got {
		ids = append(ids, c.Kind().String()+" "+c.Run())
	}
	if len(got) != 2 || got[0].ID() != owed.ID() || got[1].ID() != owedCancel.ID() {
		t.Fatalf("Unfinished = %v, want the run.failed of r-owed and r-owed-cancel only", ids)
	}
}
