package engine_test

import (
	"context"
	"fmt"
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
}
