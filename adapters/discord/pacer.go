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

// decoInterval and decoBurst are a channel's budget for reactions, and
// apart from it for typing, apart from its messages': Discord buckets each
// route on its own (X-RateLimit-Bucket and -Remaining, which discordgo
// tracks and waits on; React gives reactions a bucket id of their own so
// discordgo's 200 ms reaction limit does not replace the headers); the
// reaction route's bucket is one per 250 ms per channel. Over the
// budget a decoration is dropped, never queued or left to wait in
// discordgo for a spent bucket.
const (
	decoInterval = 250 * time.Millisecond
	decoBurst    = 1
)

// pacer runs REST writes through one queue per channel (internal/pacer):
// priorities, coalesced edits, a token bucket, and on a 429 the
// retry_after Discord sent is waited out before the same call is sent
// again. cfg and log may be set by options after newPacer, before the
// first call.
type pacer struct {
	cfg   paceConfig
	log   *slog.Logger
	q     *pq.Pacer[string]
	now   func() time.Time
	waits pq.Waits
}

func newPacer(now func() time.Time, after func(time.Duration) <-chan time.Time, cfg paceConfig, log *slog.Logger) *pacer {
	p := &pacer{cfg: cfg, log: log, now: now}
	p.q = pq.New(now, pq.Config[string]{
		Rate: func(string) (time.Duration, int) { return p.cfg.interval, p.cfg.burst },
		Decoration: func(string) (time.Duration, int) {
			if p.cfg.interval <= 0 {
				return 0, 1 // pacing off (tests): decorations too
			}
			return decoInterval, decoBurst
		},
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
		After: after,
	})
	return p
}

// do runs fn in channel's queue and returns its error. coalesce, for
// PriorityEdit calls, names the message being edited: a queued edit with the
// same name is replaced by this one and both callers get its result.
func (p *pacer) do(ctx context.Context, channel string, prio core.Priority, coalesce string, fn func(context.Context) error) error {
	return p.q.Do(ctx, channel, prio, coalesce, fn)
}

// send is do for a named route: its wait is reported per method.
func (p *pacer) send(ctx context.Context, method, channel string, prio core.Priority, coalesce string, fn func(context.Context) error) error {
	t0 := p.now()
	return p.q.Do(ctx, channel, prio, coalesce, func(ctx context.Context) error {
		p.waited(method, p.now().Sub(t0))
		return fn(ctx)
	})
}

// decorate sends a reaction or typing now, or drops it (nil: a decoration
// not shown costs nothing) when the channel's decoration budget is spent.
func (p *pacer) decorate(ctx context.Context, method, channel string, fn func(context.Context) error) error {
	return pq.DecorateOrDrop(ctx, p.q, &p.waits, method, channel+"/"+method, fn) // each route its own budget
}

func (p *pacer) waited(method string, d time.Duration) { p.waits.Waited(method, d) }

// blockAll holds every queue for d: Discord answered a 429 with the global
// flag (50 requests per second per bot).
func (p *pacer) blockAll(d time.Duration) { p.q.BlockAll(d) }

// rateLimited reports how many 429s the pacer has waited out.
func (p *pacer) rateLimited() int { return p.q.RateLimited() }
