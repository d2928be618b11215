// Package pacer is the adapters' outbound write queue: one queue per
// channel (or chat), one call at a time, highest priority first (FIFO
// within a priority), spaced by a token bucket, and on a rate-limit refusal
// the same call is retried after the wait the platform sent — during which
// a newly queued final answer overtakes waiting checklist edits. Queued
// edits of the same message are coalesced: only the latest text is sent.
// What differs per platform (the bucket, how a refusal looks, bot-wide
// limits) comes in through Config.
package pacer

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/marlowe-bot/marlowe/core"
)

// Config is what a platform tells the pacer. Its funcs are called while
// the pacer runs, so they may read adapter settings applied after New.
type Config[K comparable] struct {
	// Rate is key's token bucket: burst calls at once, then one per
	// interval. interval 0 leaves key unpaced.
	Rate func(key K) (interval time.Duration, burst int)
	// RetryAfter reports whether err is a rate-limit refusal and how long
	// to wait before sending the same call again.
	RetryAfter func(err error) (time.Duration, bool)
	// OnLimited, if set, is told of each refusal waited out (for logs).
	OnLimited func(key K, retry time.Duration)
	// GlobalPerSecond spaces calls across all keys; 0 = no bot-wide limit.
	GlobalPerSecond int
}

// Pacer runs calls through one queue per key.
type Pacer[K comparable] struct {
	now func() time.Time
	cfg Config[K]

	mu    sync.Mutex
	seq   uint64
	chans map[K]*queue
	// globalUntil holds every queue after a bot-wide refusal (BlockAll).
	globalUntil time.Time
	limited     int // refusals seen by queues since dropped

	globalMu    sync.Mutex
	globalSlots []time.Time // the last GlobalPerSecond slots given, a ring
	globalNext  int         // the oldest of them
}

type queue struct {
	items   []*item
	running bool
	kick    chan struct{}

	blockedUntil time.Time
	tokens       float64
	last         time.Time
	limited      int
}

type item struct {
	prio     core.Priority
	seq      uint64
	coalesce string
	fn       func(context.Context) error
	ctx      context.Context
	started  bool
	waiters  []chan error
}

// New returns an idle pacer. cfg.Rate and cfg.RetryAfter are required.
func New[K comparable](now func() time.Time, cfg Config[K]) *Pacer[K] {
	return &Pacer[K]{now: now, cfg: cfg, chans: make(map[K]*queue)}
}

// Do runs fn in key's queue and returns its error. coalesce, for
// PriorityEdit calls, names the message being edited: a queued edit with the
// same name is replaced by this one and both callers get its result.
func (p *Pacer[K]) Do(ctx context.Context, key K, prio core.Priority, coalesce string, fn func(context.Context) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	w := make(chan error, 1)
	// The call itself is not cancelled with the caller: a request cut
	// mid-flight leaves a post in doubt. The HTTP client's timeout bounds it.
	runCtx := context.WithoutCancel(ctx)

	p.mu.Lock()
	q := p.chans[key]
	if q == nil {
		_, burst := p.cfg.Rate(key)
		q = &queue{kick: make(chan struct{}, 1), tokens: float64(burst), last: p.now()}
		p.chans[key] = q
	}
	var it *item
	if coalesce != "" && prio == core.PriorityEdit {
		for _, x := range q.items {
			if !x.started && x.coalesce == coalesce && x.prio == core.PriorityEdit {
				it = x
				break
			}
		}
	}
	if it != nil {
		it.fn, it.ctx = fn, runCtx
		it.waiters = append(it.waiters, w)
	} else {
		p.seq++
		it = &item{prio: prio, seq: p.seq, coalesce: coalesce, fn: fn, ctx: runCtx, waiters: []chan error{w}}
		q.items = append(q.items, it)
	}
	if !q.running {
		q.running = true
		go p.work(key, q)
	} else {
		select {
		case q.kick <- struct{}{}:
		default:
		}
	}
	p.mu.Unlock()

	select {
	case err := <-w:
		return err
	case <-ctx.Done():
		p.mu.Lock()
		for i, x := range it.waiters {
			if x == w {
				it.waiters = append(it.waiters[:i], it.waiters[i+1:]...)
				break
			}
		}
		if len(it.waiters) == 0 && !it.started {
			q.remove(it)
			select {
			case q.kick <- struct{}{}:
			default:
			}
		}
		p.mu.Unlock()
		return ctx.Err()
	}
}

func (q *queue) remove(it *item) {
	for i, x := range q.items {
		if x == it {
			q.items = append(q.items[:i], q.items[i+1:]...)
			return
		}
	}
}

// next picks the highest-priority, oldest item.
func (q *queue) next() *item {
	var best *item
	for _, x := range q.items {
		if best == nil || x.prio > best.prio || x.prio == best.prio && x.seq < best.seq {
			best = x
		}
	}
	return best
}

// globalWait reserves the next bot-wide slot and returns how long to wait
// for it. The limit is GlobalPerSecond calls in any one second, not one
// call every 1/GlobalPerSecond: a lone answer's few calls (reaction,
// typing, the message) go at once, and a burst waits only once it would
// put more than GlobalPerSecond calls in a second.
func (p *Pacer[K]) globalWait() time.Duration {
	n := p.cfg.GlobalPerSecond
	if n <= 0 {
		return 0
	}
	p.globalMu.Lock()
	defer p.globalMu.Unlock()
	if len(p.globalSlots) != n {
		p.globalSlots, p.globalNext = make([]time.Time, n), 0
	}
	now := p.now()
	slot := now
	if oldest := p.globalSlots[p.globalNext]; !oldest.IsZero() {
		slot = maxTime(slot, oldest.Add(time.Second))
	}
	if newest := p.globalSlots[(p.globalNext+n-1)%n]; newest.After(slot) {
		slot = newest // slots stay in the order given
	}
	p.globalSlots[p.globalNext] = slot
	p.globalNext = (p.globalNext + 1) % n
	return slot.Sub(now)
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// work drains one key's queue and exits once it is empty and its bucket
// is full again.
func (p *Pacer[K]) work(key K, q *queue) {
	iv, burst := p.cfg.Rate(key)
	for {
		p.mu.Lock()
		now := p.now()
		if len(q.items) == 0 {
			// A queue is dropped only once it is as a new one would be: its
			// bucket refilled and no refusal pending. Dropped earlier, the
			// next call would find a full bucket and calls arriving one at a
			// time would never be spaced. Until then it idles here.
			idle := q.blockedUntil.Sub(now)
			if iv > 0 {
				tokens := q.tokens + float64(now.Sub(q.last))/float64(iv)
				idle = max(idle, time.Duration((float64(burst)-tokens)*float64(iv)))
			}
			if idle > 0 {
				p.mu.Unlock()
				t := time.NewTimer(idle)
				select {
				case <-t.C:
				case <-q.kick:
					t.Stop()
				}
				continue
			}
			q.running = false
			p.limited += q.limited
			q.limited = 0
			delete(p.chans, key)
			p.mu.Unlock()
			return
		}
		wait := max(q.blockedUntil.Sub(now), p.globalUntil.Sub(now))
		if iv > 0 {
			q.tokens += float64(now.Sub(q.last)) / float64(iv)
			q.last = now
			if q.tokens > float64(burst) {
				q.tokens = float64(burst)
			}
			if q.tokens < 1 {
				wait = max(wait, time.Duration((1-q.tokens)*float64(iv)))
			}
		}
		if wait > 0 {
			p.mu.Unlock()
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-q.kick:
				t.Stop()
			}
			continue
		}
		it := q.next()
		it.started = true
		if iv > 0 {
			q.tokens--
		}
		fn, ctx := it.fn, it.ctx
		p.mu.Unlock()

		if d := p.globalWait(); d > 0 {
			time.Sleep(d) // bounded: at most a queue's worth of global slots
		}
		// The engine checked its lease before queueing the call; the wait
		// since may have outlasted it (another replica then does what this
		// call would double).
		err := core.ActGuard(ctx)
		if err == nil {
			err = fn(ctx)
		}

		if retry, ok := p.cfg.RetryAfter(err); ok {
			// The caller's span (a post's, when traced) hears of each
			// refusal waited out: its retries and 429s.
			trace.SpanFromContext(ctx).AddEvent("marlowe.rate_limited", trace.WithAttributes(attribute.Float64("marlowe.retry_after_seconds", retry.Seconds())))
			p.mu.Lock()
			q.blockedUntil = p.now().Add(retry)
			q.limited++
			it.started = false
			if len(it.waiters) == 0 {
				q.remove(it)
			}
			p.mu.Unlock()
			if p.cfg.OnLimited != nil {
				p.cfg.OnLimited(key, retry)
			}
			continue
		}
		p.mu.Lock()
		q.remove(it)
		ws := it.waiters
		it.waiters = nil
		p.mu.Unlock()
		for _, w := range ws {
			w <- err
		}
	}
}

// BlockAll holds every queue for d, e.g. after a refusal that covers the
// whole bot rather than one channel.
func (p *Pacer[K]) BlockAll(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if until := p.now().Add(d); until.After(p.globalUntil) {
		p.globalUntil = until
	}
}

// RateLimited reports how many refusals the pacer has waited out.
func (p *Pacer[K]) RateLimited() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := p.limited
	for _, q := range p.chans {
		n += q.limited
	}
	return n
}

// Queued reports how many calls of prio wait in key's queue and how many
// callers wait on them (more callers than calls: edits were coalesced), for
// tests and metrics. A call being sent counts too.
func (p *Pacer[K]) Queued(key K, prio core.Priority) (calls, callers int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if q := p.chans[key]; q != nil {
		for _, it := range q.items {
			if it.prio == prio {
				calls++
				callers += len(it.waiters)
			}
		}
	}
	return calls, callers
}

// Stats is a pacer's load at one moment, for metrics.
type Stats struct {
	// Queued is how many calls wait in every queue (a call being sent
	// counts too).
	Queued int
	// RateLimited is how many rate-limit refusals have been waited out
	// since the pacer was made.
	RateLimited int
}

// Stats reads the pacer's queue depth and refusal count.
func (p *Pacer[K]) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := Stats{RateLimited: p.limited}
	for _, q := range p.chans {
		s.Queued += len(q.items)
		s.RateLimited += q.limited
	}
	return s
}
