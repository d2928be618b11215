package engine_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/coretest"
	"github.com/marlowe-bot/marlowe/internal/testpg"
	"github.com/marlowe-bot/marlowe/store/postgres"
)

// inboxWorld journals random histories (foldGen: approvals asked, decided,
// expired; grants made and revoked; policies naming approvers and admins;
// redactions) in item channels, people's chatter in as many channels
// again, and reports filed and dismissed in people's DMs.
func inboxWorld(t testing.TB, ctx context.Context, j core.Journal, seed uint64) (*clock, *core.Boundary) {
	t.Helper()
	clk := &clock{t: time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)}
	b := core.NewBoundary(clk.Now)
	r := rand.New(rand.NewPCG(seed, 0x1b0c))
	for i := range 12 {
		g := &foldGen{t: t, r: r, b: b, clk: clk, sc: chanScope(fmt.Sprintf("S%dI%d", seed, i))}
		for range 80 {
			if r.IntN(25) == 0 {
				g.redact(ctx, j, nil)
				continue
			}
			if drafts := g.next(); len(drafts) > 0 {
				if _, err := j.Append(ctx, drafts...); err != nil {
					t.Fatal(err)
				}
			}
		}
		quiet := chanScope(fmt.Sprintf("S%dQ%d", seed, i))
		for k := range 20 {
			who := genPeople[r.IntN(len(genPeople))]
			d, err := b.Human(who, quiet, core.Meta{}, &core.MessageReceived{MessageID: fmt.Sprintf("S%dQ%d-%d", seed, i, k), Author: who, Visibility: core.Public, Text: "chatter"})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := j.Append(ctx, d); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := range 20 {
		who := genPeople[r.IntN(len(genPeople))]
		dm := core.Scope{Platform: platform, Workspace: "W1", Channel: "D-" + who.ID}
		clk.Advance(time.Duration(r.IntN(36)) * time.Hour)
		id := fmt.Sprintf("rep-%d-%d", seed, i)
		d, err := b.System("scheduler", dm, core.Meta{}, &core.ReportFiled{ReportID: id, Owner: who.ID, Title: "report " + id, Body: "body"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := j.Append(ctx, d); err != nil {
			t.Fatal(err)
		}
		if r.IntN(3) == 0 {
			d, err := b.Human(who, dm, core.Meta{}, &core.ReportDismissed{ReportID: id, By: who})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := j.Append(ctx, d); err != nil {
				t.Fatal(err)
			}
		}
	}
	return clk, b
}

// openJournalPG opens a journal in a fresh PostgreSQL database.
func openJournalPG(tb testing.TB) *postgres.Store {
	tb.Helper()
	j, err := postgres.Open(tb.Context(), testpg.New(tb), coretest.NewSigner(tb))
	if err != nil {
		tb.Fatalf("open journal: %v", err)
	}
	tb.Cleanup(j.Close)
	return j
}

// Inbox, App Home and `consents` read only the channels the store's item
// index names, and what they list is what folding every channel of the
// platform lists, for every person at several moments of random journals
// on PostgreSQL (the index is the store's SQL).
func TestInboxFromTheItemIndexEqualsEveryChannel(t *testing.T) {
	j := openJournalPG(t)
	ctx := t.Context()
	for seed := uint64(1); seed <= 3; seed++ {
		clk, b := inboxWorld(t, ctx, j, seed)
		e := newFoldEngine(t, foldWorld{j: j, b: b, clk: clk})
		people := append(slices.Clone(genPeople), core.Person{ID: "UNOBODY"})
		nonEmpty := 0
		for range 4 {
			for _, p := range people {
				got, err := e.Inbox(ctx, platform, p.ID)
				if err != nil {
					t.Fatal(err)
				}
				want, err := e.InboxOfEveryChannel(ctx, platform, p.ID)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("seed %d, %s at %s: the index's inbox differs from every channel's\n got: %+v\nwant: %+v", seed, p.ID, clk.Now(), got, want)
				}
				if len(got) > 0 {
					nonEmpty++
				}
				gotG, err := e.GrantIDs(ctx, platform, p.ID, false)
				if err != nil {
					t.Fatal(err)
				}
				wantG, err := e.GrantIDs(ctx, platform, p.ID, true)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(gotG, wantG) {
					t.Fatalf("seed %d, %s: the index's grants %v, every channel's %v", seed, p.ID, gotG, wantG)
				}
			}
			clk.Advance(20 * time.Hour) // approvals expire, reports age out
		}
		if nonEmpty == 0 {
			t.Fatalf("seed %d: every inbox was empty: the generator is broken", seed)
		}
	}
}

// readLog records the channels a journal's reads touch.
type readLog struct {
	core.Journal
	mu   chan struct{}
	read map[core.ChannelKey]int
}

func (j *readLog) Read(ctx context.Context, ch core.ChannelKey, from uint64, limit int) ([]core.Command, error) {
	j.mu <- struct{}{}
	j.read[ch]++
	<-j.mu
	return j.Journal.Read(ctx, ch, from, limit)
}

func (j *readLog) Head(ctx context.Context, ch core.ChannelKey) (uint64, core.Hash, error) {
	j.mu <- struct{}{}
	j.read[ch]++
	<-j.mu
	return j.Journal.Head(ctx, ch)
}

// Attack (a platform of many quiet channels): `inbox`, App Home and
// `consents` read only the channels holding an approval, a grant or a
// report; a channel of people's messages alone is never read, however many
// there are. (Before, each call folded every channel of the platform.)
func TestInboxReadsOnlyChannelsWithItems(t *testing.T) {
	ctx := t.Context()
	mem := coretest.NewMemJournal(coretest.NewSigner(t))
	clk, b := inboxWorld(t, ctx, mem, 9)
	log := &readLog{Journal: mem, mu: make(chan struct{}, 1), read: map[core.ChannelKey]int{}}
	e := newFoldEngine(t, foldWorld{j: log, b: b, clk: clk})
	for _, p := range genPeople {
		if _, err := e.Inbox(ctx, platform, p.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := e.GrantIDs(ctx, platform, p.ID, false); err != nil {
			t.Fatal(err)
		}
	}
	items, err := mem.ItemChannels(ctx, platform)
	if err != nil || len(items) == 0 {
		t.Fatalf("item channels: %v %v", items, err)
	}
	for ch, n := range log.read {
		if !slices.Contains(items, ch) {
			t.Fatalf("the inbox read channel %s (%d reads), which holds no item", ch, n)
		}
	}
	if len(log.read) == 0 {
		t.Fatal("the inbox read no channel at all")
	}
}

// BenchmarkInbox measures one person's inbox on PostgreSQL over a platform
// of 1,000 channels of people's messages and the item channels of
// inboxWorld, from the item index (index) and by folding every channel
// (every-channel, what Inbox did before), with the engine's channel cache
// warm: what each `inbox` or App Home publish costs.
//
//	go test -run '^$' -bench Inbox -benchtime 20x ./engine/
func BenchmarkInbox(b *testing.B) {
	j := openJournalPG(b)
	ctx := b.Context()
	clk, bd := inboxWorld(b, ctx, j, 1)
	for i := range 1000 {
		sc := chanScope(fmt.Sprintf("B%04d", i))
		var drafts []core.Draft
		for k := range 3 {
			d, err := bd.Human(alice, sc, core.Meta{}, &core.MessageReceived{MessageID: fmt.Sprintf("B%04d-%d", i, k), Author: alice, Visibility: core.Public, Text: "chatter"})
			if err != nil {
				b.Fatal(err)
			}
			drafts = append(drafts, d)
		}
		if _, err := j.Append(ctx, drafts...); err != nil {
			b.Fatal(err)
		}
	}
	e := newFoldEngine(b, foldWorld{j: j, b: bd, clk: clk})
	items, err := j.ItemChannels(ctx, platform)
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("%d item channels", len(items))
	for _, c := range []struct {
		name  string
		inbox func() ([]core.InboxItem, error)
	}{
		{"index", func() ([]core.InboxItem, error) { return e.Inbox(ctx, platform, alice.ID) }},
		{"every-channel", func() ([]core.InboxItem, error) { return e.InboxOfEveryChannel(ctx, platform, alice.ID) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			if _, err := c.inbox(); err != nil { // warm the channel cache
				b.Fatal(err)
			}
			for b.Loop() {
				if _, err := c.inbox(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
