package discord

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/marlowe-bot/marlowe/core"
)

type paceConfig struct {
	interval time.Duration // one call per interval after the burst; 0 = unpaced
	burst    int
}

// pacer runs REST writes through one queue per channel. Each queue runs
// one call at a time, highest priority first (FIFO within a priority),
// spaces calls with a token bucket, and on a 429 waits the Retry-After the
// server sent before trying the same call again — during which a newly
// queued final answer overtakes waiting checklist edits. Queued edits to
// the same message are coalesced: only the latest text is sent.
type pacer struct {
	now func() time.Time
	cfg paceConfig
	log *slog.Logger

	mu    sync.Mutex
	seq   uint64
	chans map[string]*chanQueue
	// globalUntil holds every queue after a global 429 (all routes).
	globalUntil time.Time
	limited     int // 429s seen, for tests and metrics
}

type chanQueue struct {
	items   []*paceItem
	running bool
	kick    chan struct{}

	blockedUntil time.Time
	tokens       float64
	last         time.Time
	limited      int
}

type paceItem struct {
	prio     core.Priority
	seq      uint64
	coalesce string
	fn       func(context.Context) error
	ctx      context.Context
	started  bool
	waiters  []chan error
}

func newPacer(now func() time.Time, cfg paceConfig, log *slog.Logger) *pacer {
	return &pacer{now: now, cfg: cfg, log: log, chans: make(map[string]*chanQueue)}
}

// do runs fn in channel's queue and returns its error. coalesce, for
// PriorityEdit calls, names the message being edited: a queued edit with the
// same name is replaced by this one and both callers get its result.
func (p *pacer) do(ctx context.Context, channel string, prio core.Priority, coalesce string, fn func(context.Context) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	w := make(chan error, 1)
	// The call itself is not cancelled with the caller: an HTTP request cut
	// mid-flight leaves a post in doubt. The HTTP client's timeout bounds it.
	runCtx := context.WithoutCancel(ctx)

	p.mu.Lock()
	q := p.chans[channel]
	if q == nil {
		q = &chanQueue{kick: make(chan struct{}, 1), tokens: float64(p.cfg.burst), last: p.now()}
		p.chans[channel] = q
	}
	var it *paceItem
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
		it = &paceItem{prio: prio, seq: p.seq, coalesce: coalesce, fn: fn, ctx: runCtx, waiters: []chan error{w}}
		q.items = append(q.items, it)
	}
	if !q.running {
		q.running = true
		go p.work(channel, q)
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

func (q *chanQueue) remove(it *paceItem) {
	for i, x := range q.items {
		if x == it {
			q.items = append(q.items[:i], q.items[i+1:]...)
			return
		}
	}
}

// next picks the highest-priority, oldest item.
func (q *chanQueue) next() *paceItem {
	var best *paceItem
	for _, x := range q.items {
		if best == nil || x.prio > best.prio || x.prio == best.prio && x.seq < best.seq {
			best = x
		}
	}
	return best
}

// work drains one channel's queue and exits when it is empty.
func (p *pacer) work(channel string, q *chanQueue) {
	for {
		p.mu.Lock()
		if len(q.items) == 0 {
			q.running = false
			p.limited += q.limited
			q.limited = 0
			if !p.now().Before(q.blockedUntil) && q.tokens >= float64(p.cfg.burst)-1 {
				delete(p.chans, channel)
			}
			p.mu.Unlock()
			return
		}
		now := p.now()
		wait := max(q.blockedUntil.Sub(now), p.globalUntil.Sub(now))
		if p.cfg.interval > 0 {
			q.tokens += float64(now.Sub(q.last)) / float64(p.cfg.interval)
			q.last = now
			if q.tokens > float64(p.cfg.burst) {
				q.tokens = float64(p.cfg.burst)
			}
			if q.tokens < 1 {
				wait = max(wait, time.Duration((1-q.tokens)*float64(p.cfg.interval)))
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
		if p.cfg.interval > 0 {
			q.tokens--
		}
		fn, ctx := it.fn, it.ctx
		p.mu.Unlock()

		err := fn(ctx)

		var rl *discordgo.RateLimitError
		if errors.As(err, &rl) {
			// Discord's retry_after is often well under a second; it is
			// honoured as sent (with a small floor against a zero).
			retry := max(rl.RetryAfter, 50*time.Millisecond)
			p.mu.Lock()
			q.blockedUntil = p.now().Add(retry)
			q.limited++
			it.started = false
			if len(it.waiters) == 0 {
				q.remove(it)
			}
			p.mu.Unlock()
			p.log.Warn("discord: rate limited; waiting as told", "channel", channel, "retry_after", retry)
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

// blockAll holds every queue for d: Discord answered a 429 with the global
// flag (50 requests per second per bot).
func (p *pacer) blockAll(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if until := p.now().Add(d); until.After(p.globalUntil) {
		p.globalUntil = until
	}
}

// rateLimited reports how many 429s the pacer has waited out.
func (p *pacer) rateLimited() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := p.limited
	for _, q := range p.chans {
		n += q.limited
	}
	return n
}
