package deliverytest

import (
	"sort"
	"sync"
	"time"
)

// Clock is a manual delivery.Clock: time moves only by Advance, and After
// fires when it passes. Waiting reports that someone called After, so a test
// advances exactly when a claimer waits, never by sleeping.
type Clock struct {
	mu      sync.Mutex
	now     time.Time
	timers  []timer
	waiting chan struct{}
}

type timer struct {
	at time.Time
	ch chan time.Time
}

// NewClock returns a clock at a fixed instant.
func NewClock() *Clock {
	return &Clock{now: time.Unix(1_700_000_000, 0), waiting: make(chan struct{}, 1)}
}

// Now implements delivery.Clock.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// After implements delivery.Clock.
func (c *Clock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	if d <= 0 {
		ch <- c.now
		return ch
	}
	c.timers = append(c.timers, timer{at: c.now.Add(d), ch: ch})
	select {
	case c.waiting <- struct{}{}:
	default:
	}
	return ch
}

// Waiting receives after After was called (at least once since the last
// receive).
func (c *Clock) Waiting() <-chan struct{} { return c.waiting }

// Advance moves time by d and fires the timers it passes.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	c.fireLocked()
}

// AdvanceToNext moves time to the earliest pending timer, if any, and fires
// it. It reports whether one was pending.
func (c *Clock) AdvanceToNext() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.timers) == 0 {
		return false
	}
	sort.Slice(c.timers, func(i, j int) bool { return c.timers[i].at.Before(c.timers[j].at) })
	if next := c.timers[0].at; next.After(c.now) {
		c.now = next
	}
	c.fireLocked()
	return true
}

func (c *Clock) fireLocked() {
	keep := c.timers[:0]
	for _, t := range c.timers {
		if t.at.After(c.now) {
			keep = append(keep, t)
			continue
		}
		t.ch <- c.now
	}
	clear(c.timers[len(keep):])
	c.timers = keep
}
