package discord

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/marlowe-bot/marlowe/core"
	pq "github.com/marlowe-bot/marlowe/internal/pacer"
)

type paceConfig struct {
	interval time.Duration // one call per interval after the burst; 0 = unpaced
	burst    int
}

// pacer runs REST writes through one queue per channel (internal/pacer):
// priorities, coalesced edits, a token bucket, and on a 429 the
// retry_after Discord sent is waited out before the same call is sent
// again. cfg and log may be set by options after newPacer, before the
// first call.
type pacer struct {
	cfg paceConfig
	log *slog.Logger
	q   *pq.Pacer[string]
}

func newPacer(now func() time.Time, cfg paceConfig, log *slog.Logger) *pacer {
	p := &pacer{cfg: cfg, log: log}
	p.q = pq.New(now, pq.Config[string]{
		Rate: func(string) (time.Duration, int) { return p.cfg.interval, p.cfg.burst },
		RetryAfter: func(err error) (time.Duration, bool) {
			var rl *discordgo.RateLimitError
			if errors.As(err, &rl) {
				// Discord's retry_after is often well under a second; it is
				// honoured as sent (with a small floor against a zero).
				return max(rl.RetryAfter, 50*time.Millisecond), true
			}
			return 0, false
		},
		OnLimited: func(channel string, retry time.Duration) {
			p.log.Warn("discord: rate limited; waiting as told", "channel", channel, "retry_after", retry)
		},
	})
	return p
}

// do runs fn in channel's queue and returns its error. coalesce, for
// PriorityEdit calls, names the message being edited: a queued edit with the
// same name is replaced by this one and both callers get its result.
func (p *pacer) do(ctx context.Context, channel string, prio core.Priority, coalesce string, fn func(context.Context) error) error {
	return p.q.Do(ctx, channel, prio, coalesce, fn)
}

// blockAll holds every queue for d: Discord answered a 429 with the global
// flag (50 requests per second per bot).
func (p *pacer) blockAll(d time.Duration) { p.q.BlockAll(d) }

// rateLimited reports how many 429s the pacer has waited out.
func (p *pacer) rateLimited() int { return p.q.RateLimited() }
