package pacer

import (
	"sync"
	"time"
)

// bucket is a token bucket: burst calls at once, then one per iv. iv 0
// leaves it unlimited.
type bucket struct {
	iv     time.Duration
	burst  int
	tokens float64
	last   time.Time
}

func newBucket(now time.Time, iv time.Duration, burst int) bucket {
	burst = max(burst, 1)
	return bucket{iv: iv, burst: burst, tokens: float64(burst), last: now}
}

func (b *bucket) refill(now time.Time) {
	if b.iv <= 0 || !now.After(b.last) {
		return
	}
	b.tokens = min(float64(b.burst), b.tokens+float64(now.Sub(b.last))/float64(b.iv))
	b.last = now
}

// wait is how long until need tokens are there (need is capped at burst).
func (b *bucket) wait(now time.Time, need int) time.Duration {
	if b.iv <= 0 {
		return 0
	}
	b.refill(now)
	need = min(need, b.burst)
	if b.tokens >= float64(need) {
		return 0
	}
	return time.Duration((float64(need) - b.tokens) * float64(b.iv))
}

func (b *bucket) take() {
	if b.iv > 0 {
		b.tokens--
	}
}

// untilFull is how long until the bucket is as a new one would be.
func (b *bucket) untilFull(now time.Time) time.Duration {
	if b.iv <= 0 {
		return 0
	}
	b.refill(now)
	return time.Duration((float64(b.burst) - b.tokens) * float64(b.iv))
}

// window is "at most n calls in any per", counted exactly (a sliding
// window of send times), unlike a bucket, whose burst plus refill can put
// more than its rate into one window. n 0 leaves it unlimited.
type window struct {
	n   int
	per time.Duration
	at  []time.Time // sends still inside the window, oldest first
}

func (w *window) prune(now time.Time) {
	i := 0
	for i < len(w.at) && !w.at[i].Add(w.per).After(now) {
		i++
	}
	if i > 0 {
		w.at = append(w.at[:0], w.at[i:]...)
	}
}

// wait is how long until need more calls fit (need is capped at n).
func (w *window) wait(now time.Time, need int) time.Duration {
	if w.n <= 0 {
		return 0
	}
	w.prune(now)
	need = min(need, w.n)
	over := len(w.at) + need - w.n
	if over <= 0 {
		return 0
	}
	return w.at[over-1].Add(w.per).Sub(now)
}

func (w *window) take(now time.Time) {
	if w.n > 0 {
		w.at = append(w.at, now)
	}
}

// untilEmpty is how long until no send counts any more.
func (w *window) untilEmpty(now time.Time) time.Duration {
	if w.n <= 0 {
		return 0
	}
	w.prune(now)
	if len(w.at) == 0 {
		return 0
	}
	return w.at[len(w.at)-1].Add(w.per).Sub(now)
}

// Global is a bot-wide limit, at most n calls in any one second, that
// several pacers can share (Telegram's messages and its reactions and
// chat actions all count towards its 30 a second). A slot is taken only
// when a call is committed (checked and taken at once), never reserved
// ahead and slept on. A share of the slots (headroom) is kept for what a
// person waits for: edits and decorations go only while more than that
// share is free.
type Global struct {
	mu       sync.Mutex
	w        window
	headroom int
}

// NewGlobal returns a limit of perSecond calls in any second; 0 or less
// returns nil, no limit.
func NewGlobal(perSecond int) *Global {
	if perSecond <= 0 {
		return nil
	}
	return &Global{w: window{n: perSecond, per: time.Second}, headroom: perSecond / 3}
}

// wait is how long until a call fits; low says the call is an edit or a
// decoration, which leaves the headroom free.
func (g *Global) wait(now time.Time, low bool) time.Duration {
	if g == nil {
		return 0
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.w.wait(now, g.need(low))
}

func (g *Global) need(low bool) int {
	if low {
		return 1 + g.headroom
	}
	return 1
}

// tryTake takes a slot if one fits now.
func (g *Global) tryTake(now time.Time, low bool) bool {
	if g == nil {
		return true
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.w.wait(now, g.need(low)) > 0 {
		return false
	}
	g.w.take(now)
	return true
}
