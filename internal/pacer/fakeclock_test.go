package pacer

import (
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/internal/pacer/pacertest"
)

type fakeClock = pacertest.Clock

func newFakeClock() *fakeClock { return pacertest.New() }

// runUntil advances the clock timer by timer until cond holds, waiting
// (in wall time) for the pacer's goroutines to settle between steps.
func runUntil(t *testing.T, c *fakeClock, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out (fake time %v) waiting for %s", c.Now(), what)
		}
		if at, ok := c.NextTimer(); ok {
			c.AdvanceTo(at)
		}
		time.Sleep(time.Millisecond) // the goroutines run between steps; cond decides
	}
}

// settle lets every queue of p run dry and exit (no goroutine left).
func settle[K comparable](t *testing.T, c *fakeClock, p *Pacer[K]) {
	t.Helper()
	runUntil(t, c, "queues to exit", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return len(p.chans) == 0
	})
}
