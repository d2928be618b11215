package slack

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/slack-go/slack"

	"github.com/marlowe-bot/marlowe/core"
	pq "github.com/marlowe-bot/marlowe/internal/pacer"
)

type paceConfig struct {
	interval time.Duration // one call per interval after the burst; 0 = unpaced
	burst    int
}

// pacer runs Web API writes through one queue per channel (internal/pacer):
// priorities, coalesced edits, a token bucket, and on a 429 the
// Retry-After Slack sent is waited out before the same call is sent again.
type pacer struct {
	q *pq.Pacer[string]
}

func newPacer(now func() time.Time, cfg paceConfig, log *slog.Logger) *pacer {
	return &pacer{q: pq.New(now, pq.Config[string]{
		Rate: func(string) (time.Duration, int) { return cfg.interval, cfg.burst },
		RetryAfter: func(err error) (time.Duration, bool) {
			var rl *slack.RateLimitedError
			if errors.As(err, &rl) {
				return max(rl.RetryAfter, time.Second), true
			}
			return 0, false
		},
		OnLimited: func(channel string, retry time.Duration) {
			log.Warn("slack: rate limited; waiting as told", "channel", channel, "retry_after", retry)
		},
	})}
}

// do runs fn in channel's queue and returns its error. coalesce, for
// PriorityEdit calls, names the message being edited: a queued edit with the
// same name is replaced by this one and both callers get its result.
func (p *pacer) do(ctx context.Context, channel string, prio core.Priority, coalesce string, fn func(context.Context) error) error {
	return p.q.Do(ctx, channel, prio, coalesce, fn)
}
