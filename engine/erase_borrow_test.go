package engine_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/coretest"
	"github.com/marlowe-bot/marlowe/engine"
)

// An installation-wide erasure borrows each channel's view and releases
// it: after erasing Alice's messages in 30 channels the engine holds none
// of their folds (it used to keep every channel it touched loaded).
func TestErasureReleasesTheViewsItBorrows(t *testing.T) {
	ctx := context.Background()
	clk := &clock{t: time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)}
	b := core.NewBoundary(clk.Now)
	j := coretest.NewMemJournal(coretest.NewSigner(t))
	for i := range 30 {
		sc := chanScope(fmt.Sprintf("E%d", i))
		d, err := b.Human(alice, sc, core.Meta{}, &core.MessageReceived{MessageID: fmt.Sprintf("M%d", i), Author: alice, Visibility: core.Public, Text: fmt.Sprintf("my secret number %d is here", i)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := j.Append(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	e := eraseEngine(t, j, b, clk)
	n, err := engine.ErasePerson(ctx, e, platform, alice.ID)
	if err != nil || n != 30 {
		t.Fatalf("erased %d, %v; want her 30 messages", n, err)
	}
	if got := engine.LoadedViews(e); got != 0 {
		t.Fatalf("after the erasure the engine holds %d channels' folds, want none", got)
	}
	if got := engine.HeldViews(e); got != 0 {
		t.Fatalf("after the erasure the engine keeps %d channels' views, want none", got)
	}
}

// Every installation-wide job borrows the views it reads and releases
// them: after `what do you know about me`, an export, an inbox and a
// click on an unknown card (searched for everywhere) over 40 channels the engine keeps the views it kept before (one channel in use)
// and no more, folded or not.
func TestInstallationJobsReleaseTheViewsTheyBorrow(t *testing.T) {
	ctx := context.Background()
	clk := &clock{t: time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)}
	b := core.NewBoundary(clk.Now)
	j := coretest.NewMemJournal(coretest.NewSigner(t))
	for i := range 40 {
		sc := chanScope(fmt.Sprintf("J%d", i))
		d, err := b.Human(alice, sc, core.Meta{}, &core.MessageReceived{MessageID: fmt.Sprintf("M%d", i), Author: alice, Visibility: core.Public, Text: fmt.Sprintf("note %d", i)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := j.Append(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	e, err := engine.New(engine.Config{
		Journal: j, Boundary: b, CardKey: cardKey, Clock: clk.Now,
		Surfaces: map[string]core.Surface{platform: coretest.NewFakeSurface(platform, botID)},
		Router:   core.RouterFunc(func(context.Context, core.Event) (bool, string, error) { return true, "mention", nil }),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	// One channel the engine is using: it keeps it through the jobs.
	if _, err := engine.EngineFoldDump(ctx, e, chanScope("J0").Key()); err != nil {
		t.Fatal(err)
	}
	before, loaded := engine.HeldViews(e), engine.LoadedViews(e)
	if before != 1 || loaded != 1 {
		t.Fatalf("before the jobs: %d views, %d folded; want the one in use", before, loaded)
	}
	jobs := []struct {
		name string
		run  func() error
	}{
		{"what do you know about me", func() error {
			text, err := e.AboutMe(ctx, platform, alice)
			if err == nil && !strings.Contains(text, ": 1, from") {
				err = fmt.Errorf("about me lists none of her messages: %s", text)
			}
			return err
		}},
		{"export", func() error {
			data, err := e.ExportData(ctx, platform, alice.ID)
			if err == nil && !strings.Contains(string(data), "note 39") {
				err = fmt.Errorf("the export misses her messages")
			}
			return err
		}},
		{"inbox", func() error { _, err := e.InboxOfEveryChannel(ctx, platform, alice.ID); return err }},
		{"a click on an unknown card", func() error {
			found, err := engine.FindApproval(ctx, e, "no-such-approval")
			if found {
				err = fmt.Errorf("found an approval nobody asked for")
			}
			return err
		}},
	}
	for _, job := range jobs {
		if err := job.run(); err != nil {
			t.Fatalf("%s: %v", job.name, err)
		}
		if got, f := engine.HeldViews(e), engine.LoadedViews(e); got != before || f != loaded {
			t.Errorf("after %s over 40 channels the engine keeps %d views (%d folded), want %d (%d)", job.name, got, f, before, loaded)
		}
	}
	if !e.Loaded(chanScope("J0").Key()) {
		t.Error("the channel in use was dropped by a job")
	}
}
