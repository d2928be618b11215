package engine_test

import (
	"context"
	"errors"
	"net/url"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/coretest"
	"github.com/marlowe-bot/marlowe/core/exporttest"
	"github.com/marlowe-bot/marlowe/engine"
)

// A stored export lives as long as its link: the sweep deletes it once the
// link expired (nobody need open it), and `forget me` deletes the
// person's archives at once, leaving others'.
func TestStoredExportsAreDeletedOnExpiryAndOnForgetMe(t *testing.T) {
	ctx := context.Background()
	clk := &clock{t: time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)}
	b := core.NewBoundary(clk.Now)
	j := coretest.NewMemJournal(coretest.NewSigner(t))
	d, err := b.Human(alice, chanScope("X"), core.Meta{}, &core.MessageReceived{MessageID: "M1", Author: alice, Visibility: core.Public, Text: "hello"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j.Append(ctx, d); err != nil {
		t.Fatal(err)
	}
	store := &exporttest.Mem{}
	e, err := engine.New(engine.Config{
		Journal: j, Boundary: b, CardKey: cardKey, Clock: clk.Now, Exports: store, ExportURL: "https://bot.example",
		Surfaces: map[string]core.Surface{platform: coretest.NewFakeSurface(platform, botID)},
		Router:   core.RouterFunc(func(context.Context, core.Event) (bool, string, error) { return true, "mention", nil }),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	fetch := func(link string) ([]byte, error) {
		u, err := url.Parse(link)
		if err != nil {
			t.Fatal(err)
		}
		return e.ExportFile(ctx, u.Query())
	}

	first, err := e.StoreExport(ctx, platform, alice.ID)
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(10 * time.Minute)
	second, err := e.StoreExport(ctx, platform, alice.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.StoreExport(ctx, platform, "UBOB"); err != nil {
		t.Fatal(err)
	}
	clk.Advance(6 * time.Minute) // the first link expired, the others not
	if err := e.SweepExports(ctx); err != nil {
		t.Fatal(err)
	}
	if store.Len() != 2 {
		t.Fatalf("after the sweep %d archives kept, want the 2 unexpired", store.Len())
	}
	if _, err := fetch(first); !errors.Is(err, core.ErrExportGone) {
		t.Errorf("the expired link: %v, want gone", err)
	}
	if data, err := fetch(second); err != nil || len(data) == 0 {
		t.Fatalf("the live link: %v", err)
	}
	if _, err := engine.ErasePerson(ctx, e, platform, alice.ID); err != nil {
		t.Fatal(err)
	}
	if store.Len() != 1 {
		t.Errorf("after forget me %d archives kept, want Bob's alone", store.Len())
	}
	if _, err := fetch(second); !errors.Is(err, core.ErrExportGone) {
		t.Errorf("her live link after forget me: %v, want gone", err)
	}
}
