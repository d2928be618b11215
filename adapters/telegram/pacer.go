package telegram

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/marlowe-bot/marlowe/core"
)

type paceConfig struct {
	chatInterval    time.Duration // per chat: one call per interval after the burst; 0 = unpaced
	chatBurst       int
	groupPerMinute  int // groups: at most this many a minute (sustained); 0 = no extra limit
	globalPerSecond int // all chats together; 0 = unlimited
}

// interval is the sustained spacing for a chat: groups are held to
// groupPerMinute as well as to chatInterval.
func (c paceConfig) interval(chatID int64) time.Duration {
	iv := c.chatInterval
	if chatID < 0 && c.groupPerMinute > 0 {
		iv = max(iv, time.Minute/time.Duration(c.groupPerMinute))
	}
	return iv
}

// pacer runs Bot API writes through one queue per chat (Telegram's limits
// are per chat, not per topic). Each queue runs one call at a time, highest
// priority first (FIFO within a priority), spaces calls with a token
// bucket, and on a 429 waits the retry_after Telegram sent before trying the
// same call again — during which a newly queued answer or card overtakes
// waiting checklist edits. Queued edits of the same message are coalesced:
// only the latest text is sent. A global spacing keeps all chats together
// under the bot-wide limit.
type pacer struct {
	now func() time.Time
	cfg paceConfig
	log *slog.Logger

	mu    sync.Mutex
	seq   uint64
	chans map[int64]*chatQueue

	globalMu   sync.Mutex
	globalNext time.Time
}

type chatQueue struct {
	items   []*paceItem
	running bool
	kick    chan struct{}

	blockedUntil time.Time
	tokens       float64
	last         time.Time
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
	return &pacer{now: now, cfg: cfg, log: log, chans: map[int64]*chatQueue{}}
}

// do runs fn in chat's queue and returns its error. coalesce, for
// PriorityEdit calls, names the message being edited: a queued edit with the
// same name is replaced by this one and both callers get its result.
func (p *pacer) do(ctx context.Context, chat int64, prio core.Priority, coalesce string, fn func(context.Context) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	w := make(chan error, 1)
	// The call itself is not cancelled with the caller: a request cut
	// mid-flight leaves a post in doubt. The HTTP client's timeout bounds it.
	runCtx := context.WithoutCancel(ctx)

	p.mu.Lock()
	q := p.chans[chat]
	if q == nil {
		q = &chatQueue{kick: make(chan struct{}, 1), tokens: float64(p.cfg.chatBurst), last: p.now()}
		p.chans[chat] = q
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
		go p.work(chat, q)
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

func (q *chatQueue) remove(it *paceItem) {
	for i, x := range q.items {
		if x == it {
			q.items = append(q.items[:i], q.items[i+1:]...)
			return
		}
	}
}

// next picks the highest-priority, oldest item.
func (q *chatQueue) next() *paceItem {
	var best *paceItem
	for _, x := range q.items {
		if best == nil || x.prio > best.prio || x.prio == best.prio && x.seq < best.seq {
			best = x
		}
	}
	return best
}

// globalWait reserves the next bot-wide slot and returns how long to wait
// for it.
func (p *pacer) globalWait() time.Duration {
	if p.cfg.globalPerSecond <= 0 {
		return 0
	}
	p.globalMu.Lock()
	defer p.globalMu.Unlock()
	now := p.now()
	slot := now
	if p.globalNext.After(now) {
		slot = p.globalNext
	}
	p.globalNext = slot.Add(time.Second / time.Duration(p.cfg.globalPerSecond))
	return slot.Sub(now)
}

// work drains one chat's queue and exits when it is empty.
func (p *pacer) work(chat int64, q *chatQueue) {
	iv := p.cfg.interval(chat)
	for {
		p.mu.Lock()
		if len(q.items) == 0 {
			q.running = false
			if !p.now().Before(q.blockedUntil) && q.tokens >= float64(p.cfg.chatBurst)-1 {
				delete(p.chans, chat)
			}
			p.mu.Unlock()
			return
		}
		now := p.now()
		wait := q.blockedUntil.Sub(now)
		if iv > 0 {
			q.tokens += float64(now.Sub(q.last)) / float64(iv)
			q.last = now
			if q.tokens > float64(p.cfg.chatBurst) {
				q.tokens = float64(p.cfg.chatBurst)
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
			time.Sleep(d) // bounded: at most a queue's worth of 1/30 s slots
		}
		err := fn(ctx)

		if retry, ok := isRateLimited(err); ok {
			p.mu.Lock()
			q.blockedUntil = p.now().Add(retry)
			it.started = false
			if len(it.waiters) == 0 {
				q.remove(it)
			}
			p.mu.Unlock()
			p.log.Warn("telegram: flood control; waiting as told", "chat", chat, "retry_after", retry)
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
