// Package pacer is the adapters' outbound write queue: one queue per
// channel (or chat), one call at a time, highest priority first (FIFO
// within a priority), spaced by a token bucket and, where the platform
// counts so, a sliding window; on a rate-limit refusal the same call is
// retried after the wait the platform sent — during which a newly queued
// final answer overtakes waiting checklist edits. Queued edits of the same
// message are coalesced: only the latest text is sent, and an edit leaves
// the key's last call free for an answer. Decorations (reactions, typing)
// are not queued at all (Decorate): they go at once on a budget of their
// own or are dropped. What differs per platform (the limits, how a refusal
// looks, bot-wide limits) comes in through Config; every wait is on the
// injected clock.
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
	// Window, if set, is a second limit of key: at most n calls in any
	// per, counted exactly (Telegram's 20 messages a minute in a group).
	// n 0 leaves it off.
	Window func(key K) (n int, per time.Duration)
	// Decoration is key's budget for Decorate (reactions, typing): a
	// bucket of its own that never takes from Rate's or Window's. nil
	// leaves decorations unpaced (the global limit still applies).
	Decoration func(key K) (interval time.Duration, burst int)
	// RetryAfter reports whether err is a rate-limit refusal and how long
	// to wait before sending the same call again.
	RetryAfter func(err error) (time.Duration, bool)
	// OnLimited, if set, is told of each refusal waited out (for logs),
	// with the refused call's context (its span, when traced).
	OnLimited func(ctx context.Context, key K, retry time.Duration)
	// Global is a bot-wide limit, possibly shared with other pacers. When
	// nil, GlobalPerSecond > 0 makes one of the pacer's own.
	Global          *Global
	GlobalPerSecond int
	// After is the injected clock's timer (default time.After): every wait
	// of the pacer is on the same clock as now.
	After func(time.Duration) <-chan time.Time
}

// Pacer runs calls through one queue per key.
type Pacer[K comparable] struct {
	now    func() time.Time
	after  func(time.Duration) <-chan time.Time
	cfg    Config[K]
	global *Global

	mu    sync.Mutex
	seq   uint64
	chans map[K]*queue
	decos map[K]*deco
	// globalUntil holds every queue after a bot-wide refusal (BlockAll).
	globalUntil time.Time
	limited     int // refusals seen by queues since dropped
	dropped     int // decorations dropped
}

type queue struct {
	items   []*item
	running bool
	kick    chan struct{}

	blockedUntil time.Time
	bucket       bucket
	window       window
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
	p := &Pacer[K]{now: now, after: cfg.After, cfg: cfg, global: cfg.Global, chans: make(map[K]*queue), decos: make(map[K]*deco)}
	if p.after == nil {
		p.after = time.After
	}
	if p.global == nil {
		p.global = NewGlobal(cfg.GlobalPerSecond)
	}
	return p
}

// Do runs fn in key's queue and returns its error. coalesce, for
// PriorityEdit calls, names the message being edited: a queued edit with the
// same name is replaced by this one and both callers get its result. A
// caller whose ctx ends before its call is sent withdraws it.
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
		q = &queue{kick: make(chan struct{}, 1)}
		iv, burst := p.cfg.Rate(key)
		q.bucket = newBucket(p.now(), iv, burst)
		if p.cfg.Window != nil {
			q.window.n, q.window.per = p.cfg.Window(key)
		}
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
		q.wake()
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
			q.wake()
		}
		p.mu.Unlock()
		return ctx.Err()
	}
}

// Ready reports whether a call in key's queue would go at once: nothing
// queued there, no refusal holding it or every queue, budget left. A
// caller that must not wait for budget (an event being acknowledged) asks
// first and does without the call when it would wait.
func (p *Pacer[K]) Ready(key K) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	if p.globalUntil.After(now) || p.global.wait(now, false) > 0 {
		return false
	}
	q := p.chans[key]
	if q == nil {
		return true
	}
	return len(q.items) == 0 && !q.blockedUntil.After(now) && q.bucket.wait(now, 1) <= 0 && q.window.wait(now, 1) <= 0
}

func (q *queue) wake() {
	select {
	case q.kick <- struct{}{}:
	default:
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

// need is how many of key's calls must be free for it to go: an edit
// leaves one for an answer that may come next, so a stream of checklist
// edits never makes an answer wait for the bucket.
func need(it *item) int {
	if it.prio == core.PriorityEdit {
		return 2
	}
	return 1
}

// wait sleeps d on the pacer's clock, or until q is kicked (a call was
// queued or withdrawn, which may change what goes next).
func (p *Pacer[K]) wait(q *queue, d time.Duration) {
	select {
	case <-p.after(d):
	case <-q.kick:
	}
}

// work drains one key's queue and exits once it is empty and its limits
// are as a new queue's would be.
func (p *Pacer[K]) work(key K, q *queue) {
	for {
		p.mu.Lock()
		now := p.now()
		if len(q.items) == 0 {
			// A queue is dropped only once it is as a new one would be: its
			// bucket refilled, its window empty and no refusal pending.
			// Dropped earlier, the next call would find a fresh budget and
			// calls arriving one at a time would never be spaced.
			idle := max(q.blockedUntil.Sub(now), q.bucket.untilFull(now), q.window.untilEmpty(now))
			if idle > 0 {
				p.mu.Unlock()
				p.wait(q, idle)
				continue
			}
			q.running = false
			p.limited += q.limited
			q.limited = 0
			delete(p.chans, key)
			p.mu.Unlock()
			return
		}
		it := q.next()
		n := need(it)
		wait := max(q.blockedUntil.Sub(now), p.globalUntil.Sub(now), q.bucket.wait(now, n), q.window.wait(now, n))
		if wait <= 0 {
			// The bot-wide slot is taken in the same step that commits the
			// call: while it is not free the call is still queued, so a
			// higher-priority call can overtake it and its caller can
			// withdraw it.
			if !p.global.tryTake(now, it.prio == core.PriorityEdit) {
				wait = max(p.global.wait(now, it.prio == core.PriorityEdit), time.Millisecond)
			}
		}
		if wait > 0 {
			p.mu.Unlock()
			p.wait(q, wait)
			continue
		}
		it.started = true
		q.bucket.take()
		q.window.take(now)
		fn, ctx := it.fn, it.ctx
		p.mu.Unlock()

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
				p.cfg.OnLimited(ctx, key, retry)
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
	// Dropped is how many decorations were dropped over budget.
	Dropped int
}

// Stats reads the pacer's queue depth and refusal count.
func (p *Pacer[K]) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := Stats{RateLimited: p.limited, Dropped: p.dropped}
	for _, q := range p.chans {
		s.Queued += len(q.items)
		s.RateLimited += q.limited
	}
	return s
}
