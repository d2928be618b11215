package engine_test

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/coretest"
	"github.com/marlowe-bot/marlowe/engine"
)

// eraseCountingJournal counts what an erasure asks of the journal: single
// redactions, batched ones, and reads of a channel from its start.
type eraseCountingJournal struct {
	*coretest.MemJournal
	mu        sync.Mutex
	redacts   int
	batches   int
	fullReads map[core.ChannelKey]int
}

func (j *eraseCountingJournal) Redact(ctx context.Context, seq uint64, record core.Draft) (core.Command, error) {
	j.mu.Lock()
	j.redacts++
	j.mu.Unlock()
	return j.MemJournal.Redact(ctx, seq, record)
}

func (j *eraseCountingJournal) RedactBatch(ctx context.Context, reds []core.Redaction) ([]core.Command, error) {
	j.mu.Lock()
	j.batches++
	j.mu.Unlock()
	return j.MemJournal.RedactBatch(ctx, reds)
}

func (j *eraseCountingJournal) Read(ctx context.Context, ch core.ChannelKey, from uint64, limit int) ([]core.Command, error) {
	if from <= 1 {
		j.mu.Lock()
		j.fullReads[ch]++
		j.mu.Unlock()
	}
	return j.MemJournal.Read(ctx, ch, from, limit)
}

// `forget me` finds her messages through the journal's author index and
// writes its redactions in batches: 1,200 of Alice's messages in two
// channels, with Bob's messages and answers quoting hers, are erased with
// no single redaction, at most one write per 500 redactions and channel
// phase, and each channel read from its start once (for the copies). It
// used to read every channel twice and write each redaction alone.
func TestForgetMeFindsByIndexAndRedactsInBatches(t *testing.T) {
	ctx := context.Background()
	clk := &clock{t: time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)}
	b := core.NewBoundary(clk.Now)
	signer := coretest.NewSigner(t)
	j := &eraseCountingJournal{MemJournal: coretest.NewMemJournal(signer), fullReads: map[core.ChannelKey]int{}}
	want := 0
	for c, n := range []int{1000, 200} {
		sc := chanScope(fmt.Sprintf("F%d", c))
		var drafts []core.Draft
		add := func(d core.Draft, err error) {
			t.Helper()
			if err != nil {
				t.Fatal(err)
			}
			drafts = append(drafts, d)
		}
		for i := range n {
			text := fmt.Sprintf("alice's secret number %d of channel %d", i, c)
			add(b.Human(alice, sc, core.Meta{}, &core.MessageReceived{MessageID: fmt.Sprintf("A%d-%d", c, i), Author: alice, Visibility: core.Public, Text: text}))
			add(b.Human(bob, sc, core.Meta{}, &core.MessageReceived{MessageID: fmt.Sprintf("B%d-%d", c, i), Author: bob, Visibility: core.Public, Text: fmt.Sprintf("bob's own words %d", i)}))
			want++
			if i%10 == 0 {
				add(b.Agent("R", sc, core.Meta{}, &core.MessagePosted{EffectID: fmt.Sprintf("e%d-%d", c, i), MessageID: fmt.Sprintf("P%d-%d", c, i), Role: core.RoleAnswer, Text: "you said: " + text}))
				want++
			}
		}
		if _, err := j.Append(ctx, drafts...); err != nil {
			t.Fatal(err)
		}
	}
	e := eraseEngine(t, j, b, clk)
	clear(j.fullReads)
	n, err := engine.ErasePerson(ctx, e, platform, alice.ID)
	if err != nil || n != want {
		t.Fatalf("erased %d, %v; want %d (her messages and the answers quoting them)", n, err, want)
	}
	j.mu.Lock()
	redacts, batches, fullReads := j.redacts, j.batches, maps.Clone(j.fullReads)
	j.mu.Unlock()
	// F0: copies in one write, her 1,000 messages in two; F1: one and one.
	if redacts != 0 || batches > 5 {
		t.Fatalf("%d single redactions and %d batches, want none and at most 5", redacts, batches)
	}
	for ch, reads := range fullReads {
		if reads > 1 {
			t.Errorf("%s read from its start %d times, want once", ch, reads)
		}
	}
	if left, err := core.MessagesBy(ctx, j, platform, alice.ID); err != nil || len(left) != 0 {
		t.Fatalf("%d of her messages left (%v)", len(left), err)
	}
	if _, err := core.VerifyAll(ctx, j, signer.Verifier()); err != nil {
		t.Fatalf("verify after the erasure: %v", err)
	}
}
