package telegram

import (
	"context"
	"log/slog"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	pq "github.com/marlowe-bot/marlowe/internal/pacer"
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
// are per chat, not per topic; see internal/pacer): priorities, coalesced
// edits, a token bucket per chat, a global spacing that keeps all chats
// together under the bot-wide limit, and on a 429 the retry_after Telegram
// sent is waited out before the same call is sent again.
type pacer struct {
	q *pq.Pacer[int64]
}

func newPacer(now func() time.Time, cfg paceConfig, log *slog.Logger) *pacer {
	return &pacer{q: pq.New(now, pq.Config[int64]{
		Rate:       func(chat int64) (time.Duration, int) { return cfg.interval(chat), cfg.chatBurst },
		RetryAfter: isRateLimited,
		OnLimited: func(chat int64, retry time.Duration) {
			log.Warn("telegram: flood control; waiting as told", "chat", chat, "retry_after", retry)
		},
		GlobalPerSecond: cfg.globalPerSecond,
	})}
}

// do runs fn in chat's queue and returns its error. coalesce, for
// PriorityEdit calls, names the message being edited: a queued edit with the
// same name is replaced by this one and both callers get its result.
func (p *pacer) do(ctx context.Context, chat int64, prio core.Priority, coalesce string, fn func(context.Context) error) error {
	return p.q.Do(ctx, chat, prio, coalesce, fn)
}
