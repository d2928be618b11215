package main

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/coretest"
	"github.com/marlowe-bot/marlowe/intent"
)

// noFullReads is a journal on which reading a channel's journal fails: the
// window rebuild must get by with the tail reads.
type noFullReads struct{ core.Journal }

func (noFullReads) Read(context.Context, core.ChannelKey, uint64, int) ([]core.Command, error) {
	return nil, errors.New("rebuild read a whole channel")
}

// The window rebuild reads the recent posts only, and still reopens every
// window that is open: a default 20-minute thread window, a top-level
// window, a channel whose policy stretched its thread window to 2 h (a post
// an hour old), and no top-level window for an answer to a DM.
func TestRebuildWindowsFromTail(t *testing.T) {
	ctx := t.Context()
	j := coretest.NewMemJournal(coretest.NewSigner(t))
	now := time.Now()
	at := now
	b := core.NewBoundary(func() time.Time { return at })
	ann := core.Person{ID: "UANN", Name: "Ann"}
	sc := func(ch, thread string) core.Scope {
		return core.Scope{Platform: "slack", Workspace: "T1", Channel: ch, Thread: thread}
	}
	must := func(d core.Draft, err error) core.Draft {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	// answer appends a message from Ann in ch (run run) and the bot's answer to it.
	answer := func(ch, msg, run string, vis core.Visibility) {
		t.Helper()
		mr := must(b.Human(ann, sc(ch, ""), core.Meta{Run: run}, &core.MessageReceived{MessageID: msg, Author: ann, Visibility: vis, Text: "hi"}))
		mp := must(b.Agent(run, sc(ch, msg), core.Meta{}, &core.MessagePosted{EffectID: "fx" + msg, MessageID: "B" + msg,
			Answering: msg, AnsweringUser: ann.ID, AnsweringTop: true, Role: core.RoleAnswer, Text: "hello"}))
		if _, err := j.Append(ctx, mr, mp); err != nil {
			t.Fatal(err)
		}
	}
	at = now.Add(-3 * time.Hour)
	answer("COLD", "M0", "r0", core.Public)
	if _, err := j.Append(ctx, must(b.Human(ann, sc("CLONG", ""), core.Meta{}, &core.PolicyChanged{Policy: core.Policy{ThreadWindowS: 7200}}))); err != nil {
		t.Fatal(err)
	}
	at = now.Add(-time.Hour)
	answer("CLONG", "M1", "r1", core.Public)
	at = now.Add(-2 * time.Minute)
	answer("CNEW", "M2", "r2", core.Public)
	answer("DNEW", "M3", "r3", core.DM)

	store := intent.NewMemoryStore(nil)
	n, err := rebuildWindows(ctx, noFullReads{j}, store, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	win := func(ch, thread string) intent.Windows {
		t.Helper()
		w, err := store.Windows(ctx, sc(ch, "").Key(), thread)
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	if w := win("CNEW", "M2"); !w.ThreadOpen(now) || !w.Toplevel.Open(ann.ID, now) {
		t.Errorf("recent answer: windows %+v, want the thread and top-level windows open", w)
	}
	if w := win("CLONG", "M1"); !w.ThreadOpen(now) {
		t.Errorf("answer an hour ago under a 2 h thread window: %+v, want open", w)
	}
	if w := win("DNEW", "M3"); !w.ThreadOpen(now) || w.Toplevel.Open(ann.ID, now) {
		t.Errorf("answer in a DM: %+v, want the thread window only", w)
	}
	if w := win("COLD", "M0"); w.ThreadOpen(now) {
		t.Errorf("answer 3 h ago: %+v, want closed", w)
	}
	if n != 4 { // three thread windows, one top-level (CLONG's closed after 6 min)
		t.Errorf("rebuilt %d windows, want 4", n)
	}
}
