package pacer

import (
	"sort"
	"sync"
	"testing"
	"time"
)

// fakeClock is the injected clock of the pacing tests: time moves only
// when the test advances it, so a minute of pacing takes no wall time.
type fakeClock struct {
	mu     sync.Mutex
	t      time.Time
	timers []fakeTimer
}

type fakeTimer struct {
	at time.Time
	c  chan time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	if d <= 0 {
		ch <- c.t
		return ch
	}
	c.timers = append(c.timers, fakeTimer{at: c.t.Add(d), c: ch})
	return ch
}

// advanceTo moves the clock to at (never back) and fires the timers due.
func (c *fakeClock) advanceTo(at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if at.After(c.t) {
		c.t = at
	}
	kept := c.timers[:0]
	for _, tm := range c.timers {
		if tm.at.After(c.t) {
			kept = append(kept, tm)
		} else {
			tm.c <- c.t
		}
	}
	c.timers = kept
}

func (c *fakeClock) advance(d time.Duration) { c.advanceTo(c.Now().Add(d)) }

// nextTimer is the earliest pending timer's deadline.
func (c *fakeClock) nextTimer() (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.timers) == 0 {
		return time.Time{}, false
	}
	ats := make([]time.Time, len(c.timers))
	for i, tm := range c.timers {
		ats[i] = tm.at
	}
	sort.Slice(ats, func(i, j int) bool { return ats[i].Before(ats[j]) })
	return ats[0], true
}

// runUntil advances the clock timer by timer until cond holds, waiting
// (in wall time) for the pacer's goroutines to settle between steps.
func (c *fakeClock) runUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out (fake time %v) waiting for %s", c.Now(), what)
		}
		if at, ok := c.nextTimer(); ok {
			c.advanceTo(at)
		}
		time.Sleep(time.Millisecond) // the goroutines run between steps; cond decides
	}
}

// settle lets every queue of p run dry and exit (no goroutine left).
func settle[K comparable](t *testing.T, c *fakeClock, p *Pacer[K]) {
	t.Helper()
	c.runUntil(t, "queues to exit", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return len(p.chans) == 0
	})
}
