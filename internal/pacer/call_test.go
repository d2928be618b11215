package pacer

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
)

// A call outside every queue (Call) counts towards the bot-wide limit:
// at PriorityEdit it leaves the third kept for answers free and waits, on
// the pacer's clock and cancellably, for a slot; an answer still goes at
// once, and so does a PriorityNormal call (a callback's answer); a
// refusal's retry_after is waited out and the call sent again.
func TestCallCountsBotWide(t *testing.T) {
	c := newFakeClock()
	p := New(c.Now, telegramLike(c))
	s := &sends{c: c}
	start := c.Now()
	for range 20 {
		if err := p.Call(t.Context(), core.PriorityEdit, s.call("read", nil)); err != nil {
			t.Fatal(err)
		}
	}
	late := make(chan error, 1)
	go func() { late <- p.Call(t.Context(), core.PriorityEdit, s.call("late read", nil)) }()
	ctx, cancel := context.WithCancel(t.Context())
	withdrawn := make(chan error, 1)
	go func() { withdrawn <- p.Call(ctx, core.PriorityEdit, s.call("withdrawn read", nil)) }()
	await(t, "both reads waiting for a slot", func() bool { return c.TimersAt(start.Add(time.Second)) == 2 })
	cancel()
	if err := <-withdrawn; !errors.Is(err, context.Canceled) {
		t.Fatalf("withdrawn call: %v", err)
	}
	if err := p.Do(t.Context(), 7, core.PriorityHigh, "", s.call("answer", nil)); err != nil {
		t.Fatal(err)
	}
	if err := p.Call(t.Context(), core.PriorityNormal, s.call("callback answer", nil)); err != nil {
		t.Fatal(err)
	}
	if n := s.n(); n != 22 || c.Now() != start {
		t.Fatalf("%d sent by %v, want 20 reads, the answer and the callback's answer at once", n, c.Now().Sub(start))
	}
	runUntil(t, c, "the late read sent", func() bool { return s.n() == 23 })
	if err := <-late; err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	at, by := s.at[22], s.by[22]
	s.mu.Unlock()
	if by != "late read" || at.Sub(start) < time.Second {
		t.Fatalf("%q sent %v after the burst, want the late read a second on", by, at.Sub(start))
	}

	// A refusal is waited out.
	refused := true
	t0 := c.Now()
	done := make(chan error, 1)
	go func() {
		done <- p.Call(t.Context(), core.PriorityEdit, func(ctx context.Context) error {
			if refused {
				refused = false
				return s.call("refused", errRefused{5 * time.Second})(ctx)
			}
			return s.call("read again", nil)(ctx)
		})
	}()
	runUntil(t, c, "the read sent again", func() bool { return s.n() == 25 })
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	gap := s.at[24].Sub(t0)
	s.mu.Unlock()
	if gap < 5*time.Second {
		t.Fatalf("sent again after %v, before retry_after (5s)", gap)
	}
	if n := p.RateLimited(); n != 1 {
		t.Fatalf("RateLimited() = %d, want 1", n)
	}
	settle(t, c, p)
}
