package engine

import (
	"context"
	"strconv"
	"testing"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/coretest"
)

// Whom a run wrote a memory for is still known after the run left the
// fold: it is read from the run's trigger in the journal (`forget me`
// erases the memories runs wrote for the person by it), even when
// retention has redacted that trigger.
func TestAuthorOfARunThatLeftTheFold(t *testing.T) {
	ctx := context.Background()
	b := core.NewBoundary(nil)
	j := coretest.NewMemJournal(coretest.NewSigner(t))
	sc := core.Scope{Platform: "test", Workspace: "W", Channel: "C"}
	ann := core.Person{ID: "UANN", Name: "Ann"}
	var trigger core.Command
	for i := range 2100 {
		id, msg := "R"+strconv.Itoa(i), "M"+strconv.Itoa(i)
		th := sc
		th.Thread = msg
		m, err := b.Human(ann, sc, core.Meta{Run: id}, &core.MessageReceived{MessageID: msg, Author: ann, Visibility: core.Public, Text: "hi"})
		if err != nil {
			t.Fatal(err)
		}
		st, err := b.Agent(id, th, core.Meta{Run: id}, &core.RunStarted{Trigger: msg})
		if err != nil {
			t.Fatal(err)
		}
		done, err := b.Agent(id, th, core.Meta{Run: id}, &core.RunCompleted{})
		if err != nil {
			t.Fatal(err)
		}
		cmds, err := j.Append(ctx, m, st, done)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			trigger = cmds[0]
		}
	}
	rd, err := b.System("retention", sc, core.Meta{Cause: trigger.ID()}, &core.CommandRedacted{Seq: trigger.Seq(), ID: trigger.ID(), Reason: "retention", TargetKind: trigger.Kind().String()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j.Redact(ctx, trigger.Seq(), rd); err != nil {
		t.Fatal(err)
	}
	v := newChanView(sc.Key(), j)
	var kept bool
	if err := v.with(ctx, func() { kept = v.fold.Run("R0") != nil }); err != nil {
		t.Fatal(err)
	}
	if kept {
		t.Fatal("run R0 is still in the fold: the history is too short")
	}
	for _, run := range []string{"R0", "R2099"} {
		who, err := authorOf(ctx, v, core.Actor{Type: core.ActorAgent, ID: run, Platform: "test"})
		if err != nil || who != ann.ID {
			t.Errorf("run %s wrote for %q, %v; want %s", run, who, err, ann.ID)
		}
	}
}
