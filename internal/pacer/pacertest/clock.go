// Package pacertest is the injected clock of pacing tests: time moves
// only when the test advances it, so a minute of pacing takes no wall time.
package pacertest

import (
	"sort"
	"sync"
	"time"
)

// Clock is a fake clock. Now and After are what a pacer is given.
type Clock struct {
	mu      sync.Mutex
	t       time.Time
	timers  []timer
	waiting chan struct{}
}

type timer struct {
	at time.Time
	c  chan time.Time
}

// New returns a clock stopped at 2026-01-01 00:00 UTC.
func New() *Clock {
	return &Clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), waiting: make(chan struct{}, 1)}
}

// Waiting receives once After set a timer (at least once since the last
// receive), so a test advances when something waits, never by sleeping.
func (c *Clock) Waiting() <-chan struct{} { return c.waiting }

// Now is the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// After fires once the clock is advanced d past now.
func (c *Clock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	if d <= 0 {
		ch <- c.t
		return ch
	}
	c.timers = append(c.timers, timer{at: c.t.Add(d), c: ch})
	select {
	case c.waiting <- struct{}{}:
	default:
	}
	return ch
}

// AdvanceTo moves the clock to at (never back) and fires the timers due.
func (c *Clock) AdvanceTo(at time.Time) {
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

// Advance moves the clock d on.
func (c *Clock) Advance(d time.Duration) { c.AdvanceTo(c.Now().Add(d)) }

// NextTimer is the earliest pending timer's deadline.
func (c *Clock) NextTimer() (time.Time, bool) {
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

// TimersAt reports how many timers are pending for at, so a test can
// await a wait (or many) among others.
func (c *Clock) TimersAt(at time.Time) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, tm := range c.timers {
		if tm.at.Equal(at) {
			n++
		}
	}
	return n
}
