package discord

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/adapters/discord/discordfake"
	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/internal/dedupe"
)

// Two replicas' adapters, each with its own gateway session of one bot, so
// both receive every dispatch; they share one Deduper as replicas share
// Redis.

// Every message reaches the engine once across both sessions, and a click
// dispatched to both is delivered once and acknowledged once (the second
// acknowledgement is refused by Discord).
func TestTwoSessionsDeliverEachMessageOnce(t *testing.T) {
	f := newFake(t, discordfake.Config{MultiSession: true})
	d := dedupe.NewMemory(nil)
	rec := newRecorder() // the engines' shared journal, in effect
	startAdapter(t, f, rec.deliver, WithDeduper(d))
	startAdapter(t, f, rec.deliver, WithDeduper(d))
	if !f.Wait(10*time.Second, func() bool { return f.LiveSessionsLocked() == 2 }) {
		t.Fatalf("live sessions never reached 2; identifies %+v", f.Identifies())
	}
	if ids := f.Identifies(); len(ids) != 2 {
		t.Fatalf("%d IDENTIFYs, want 2 (the sessions must not kick each other)", len(ids))
	}
	const n = 30
	for i := range n {
		f.Say(discordfake.Msg{Channel: []string{general, ops}[i%2], Author: alice, Content: fmt.Sprintf("m%02d", i)})
	}
	rec.waitFor(t, "every message", func() bool { return len(rec.events()) >= n })
	seen := map[string]int{}
	for _, e := range rec.events() {
		seen[e.Text]++
	}
	for i := range n {
		if c := seen[fmt.Sprintf("m%02d", i)]; c != 1 {
			t.Errorf("m%02d delivered %d times, want 1", i, c)
		}
	}

	id := f.Click(discordfake.Click{Channel: general, CustomID: "ap.aMAC", User: bob})
	if !f.Wait(10*time.Second, func() bool {
		acks := 0
		for _, cb := range f.CallbacksLocked() {
			if cb.InteractionID == id {
				acks++
			}
		}
		return acks == 1
	}) {
		t.Fatalf("the click was never acknowledged: %+v", f.Callbacks())
	}
	// Both sessions received the click and answer it; Discord takes the
	// first answer and refuses the second.
	cbPath := "interactions/" + id + "/"
	var answers []int
	if !f.Wait(10*time.Second, func() bool {
		answers = answers[:0]
		for _, c := range f.CallsLocked() {
			if strings.HasPrefix(c.Path, cbPath) {
				answers = append(answers, c.Status)
			}
		}
		return len(answers) == 2
	}) {
		t.Fatalf("the click reached one session only; answers %v", answers)
	}
	if answers[0] != http.StatusNoContent || answers[1] != http.StatusBadRequest {
		t.Errorf("interaction answers %v, want the first accepted and the second refused", answers)
	}
	if c := len(rec.clicks()); c != 1 {
		t.Fatalf("the click was delivered %d times, want 1", c)
	}
}

// gatedDeduper holds its Claims until open is closed, so the other replica
// is sure to claim first.
type gatedDeduper struct {
	dedupe.Deduper
	open chan struct{}
}

func (g gatedDeduper) Claim(ctx context.Context, key string, lease time.Duration) (string, bool, error) {
	select {
	case <-g.open:
	case <-ctx.Done():
		return "", false, ctx.Err()
	}
	return g.Deduper.Claim(ctx, key, lease)
}

// A replica that claimed a message and died before delivering it (SIGKILL
// between the claim and the journal append) must not take the message
// with it: Discord never redelivers, so the replica whose session saw the
// same message delivers it once the dead one's claim lapses. Dropping it
// as "in flight elsewhere" lost it.
func TestMessageClaimedByADeadReplicaIsDeliveredByTheOther(t *testing.T) {
	f := newFake(t, discordfake.Config{MultiSession: true})
	d := dedupe.NewMemory(nil)
	claimed := make(chan struct{})
	var once sync.Once
	dead := func(ctx context.Context, _ core.Inbound) error {
		once.Do(func() { close(claimed) })
		<-ctx.Done() // killed: never journals, commits or releases
		return ctx.Err()
	}
	cfg := Config{ClaimTTL: 300 * time.Millisecond}
	startAdapterConfig(t, f, cfg, dead, WithDeduper(d))
	rec := newRecorder()
	startAdapterConfig(t, f, cfg, rec.deliver, WithDeduper(gatedDeduper{Deduper: d, open: claimed}))
	if !f.Wait(10*time.Second, func() bool { return f.LiveSessionsLocked() == 2 }) {
		t.Fatal("live sessions never reached 2")
	}
	f.Say(discordfake.Msg{Channel: general, Author: alice, Content: "are you there?"})
	rec.waitFor(t, "the message the dead replica had claimed", func() bool {
		_, ok := rec.eventByText("are you there?")
		return ok
	})
	if n := len(rec.events()); n != 1 {
		t.Fatalf("%d deliveries, want 1", n)
	}
}
