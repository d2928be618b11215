package telegram

import (
	"context"
	"log/slog"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	pq "github.com/marlowe-bot/marlowe/internal/pacer"
)

// paceConfig counts what Telegram counts (docs/telegram.md, "Pacing"):
// messages per chat and per group, all calls bot-wide. Reactions and chat
// actions are not messages: they have a budget of their own.
type paceConfig struct {
	chatInterval    time.Duration // per chat: one message per interval after the burst; 0 = unpaced
	chatBurst       int
	groupPerMinute  int // groups: at most this many messages in any minute; 0 = no extra limit
	globalPerSecond int // all calls of all chats together; 0 = unlimited
}

// decoInterval and decoBurst pace a chat's reactions and chat actions:
// Telegram publishes no limit for them; this keeps a busy chat's 👀 and
// "typing…" (one per answer, typing again every 4 s) well inside what it
// tolerates, and a decoration over it is dropped, never queued.
const (
	decoInterval = time.Second
	decoBurst    = 3
)

// pacer runs Bot API writes through one queue per chat (Telegram's limits
// are per chat, not per topic; see internal/pacer): messages and edits
// queued by priority, edits coalesced, a token bucket per chat and, in a
// group, at most groupPerMinute in any minute; reactions and chat actions
// go at once on their own budget or are dropped. Every call takes a slot of
// the bot-wide limit when it is committed, and on a 429 the retry_after
// Telegram sent is waited out before the same call is sent again.
type pacer struct {
	q     *pq.Pacer[int64]
	now   func() time.Time
	waits pq.Waits
}

func newPacer(now func() time.Time, after func(time.Duration) <-chan time.Time, cfg paceConfig, log *slog.Logger) *pacer {
	return &pacer{now: now, q: pq.New(now, pq.Config[int64]{
		Rate: func(int64) (time.Duration, int) { return cfg.chatInterval, cfg.chatBurst },
		Window: func(chat int64) (int, time.Duration) {
			if chat < 0 { // groups, supergroups and channels have negative ids
				return cfg.groupPerMinute, time.Minute
			}
			return 0, 0
		},
		Decoration: func(int64) (time.Duration, int) {
			if cfg.chatInterval <= 0 {
				return 0, 1 // pacing off (tests): decorations too
			}
			return decoInterval, decoBurst
		},
		RetryAfter: isRateLimited,
		OnLimited: func(ctx context.Context, chat int64, retry time.Duration) {
			// chat 0: a call of no chat (a read, a callback's answer, the
			// long poll).
			log.WarnContext(ctx, "telegram: flood control; waiting as told", "chat", chat, "retry_after", retry)
		},
		GlobalPerSecond: cfg.globalPerSecond,
		After:           after,
	})}
}

// do runs fn, the Bot API method named, in chat's queue and returns its
// error. coalesce, for PriorityEdit calls, names the message being edited: a
// queued edit with the same name is replaced by this one and both callers
// get its result.
func (p *pacer) do(ctx context.Context, method string, chat int64, prio core.Priority, coalesce string, fn func(context.Context) error) error {
	t0 := p.now()
	return p.q.Do(ctx, chat, prio, coalesce, func(ctx context.Context) error {
		p.waited(method, p.now().Sub(t0))
		return fn(ctx)
	})
}

// decorate sends a reaction or chat action now, or drops it (nil: a
// decoration not shown costs nothing) when chat's decoration budget or the
// bot-wide limit has no room.
func (p *pacer) decorate(ctx context.Context, method string, chat int64, fn func(context.Context) error) error {
	return pq.DecorateOrDrop(ctx, p.q, &p.waits, method, chat, fn)
}

// call runs fn, the Bot API method named, outside every chat's queue once
// the bot-wide limit has a slot for it at prio (PriorityEdit leaves the
// third kept for answers free); a 429's retry_after is waited out.
func (p *pacer) call(ctx context.Context, method string, prio core.Priority, fn func(context.Context) error) error {
	t0 := p.now()
	return p.q.Call(ctx, prio, func(ctx context.Context) error {
		p.waited(method, p.now().Sub(t0))
		return fn(ctx)
	})
}

func (p *pacer) waited(method string, d time.Duration) { p.waits.Waited(method, d) }
