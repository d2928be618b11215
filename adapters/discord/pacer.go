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

// Discord buckets each route apart, per channel (X-RateLimit-Bucket): a
// channel's message creates, its message edits, its thread starts and its
// message reads are four buckets. Each route has a queue of its own per
// channel, so a checklist edit or a history read never takes from the
// budget of the answer's create.
const (
	routeCreate = "create message"
	routeEdit   = "edit message"
	routeThread = "start thread"
	routeRead   = "read messages"
)

// routeKey is the queue of route in channel (a create's is the channel's
// id itself).
func routeKey(channel, route string) string {
	if route == routeCreate {
		return channel
	}
	return channel + " " + route
}

// pacer runs REST calls through one queue per channel and route
// (internal/pacer): priorities, coalesced edits, a token bucket, and on a
// 429 the retry_after Discord sent is waited out before the same call is
// sent again. log may be set by options after newPacer, before the first
// call.
type pacer struct {
	cfg   paceConfig
	log   *slog.Logger
	q     *pq.Pacer[string]
	now   func() time.Time
	waits pq.Waits
}

// globalPerSecond is Discord's bot-wide limit on REST calls: 50 a second
// (interaction callbacks are outside it). The pacer counts its calls
// ahead against it, a third kept for answers, rather than learning it
// from a global 429.
const globalPerSecond = 50

func newPacer(now func() time.Time, after func(time.Duration) <-chan time.Time, cfg paceConfig, log *slog.Logger) *pacer {
	p := &pacer{cfg: cfg, log: log, now: now}
	global := 0
	if cfg.interval > 0 {
		global = globalPerSecond // pacing off (tests): no bot-wide count either
	}
	p.q = pq.New(now, pq.Config[string]{
		GlobalPerSecond: global,
		Rate:            func(string) (time.Duration, int) { return p.cfg.interval, p.cfg.burst },
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
		OnLimited: func(ctx context.Context, queue string, retry time.Duration) {
			p.log.WarnContext(ctx, "discord: rate limited; waiting as told", "queue", queue, "retry_after", retry)
		},
		After: after,
	})
	return p
}

// send runs fn in the queue of route in channel and returns its error; its
// wait is reported per route. coalesce, for PriorityEdit calls, names the
// message being edited: a queued edit with the same name is replaced by
// this one and both callers get its result.
func (p *pacer) send(ctx context.Context, route, channel string, prio core.Priority, coalesce string, fn func(context.Context) error) error {
	t0 := p.now()
	return p.q.Do(ctx, routeKey(channel, route), prio, coalesce, func(ctx context.Context) error {
		p.waited(route, p.now().Sub(t0))
		return fn(ctx)
	})
}

// decorate sends a reaction or typing now, or drops it (nil: a decoration
// not shown costs nothing) when the channel's decoration budget is spent.
func (p *pacer) decorate(ctx context.Context, method, channel string, fn func(context.Context) error) error {
	return pq.DecorateOrDrop(ctx, p.q, &p.waits, method, channel+"/"+method, fn) // each route its own budget
}

func (p *pacer) waited(method string, d time.Duration) { p.waits.Waited(method, d) }

// bucketSpent reports whether discordgo would make a call on bucketID
// wait: the route's bucket has no call left before a reset still ahead
// (X-RateLimit-Remaining 0, -Reset-After), a global limit holds, or a call
// on that route is in flight (discordgo holds the bucket until its answer).
// A decoration is then dropped: discordgo would sleep, and a 👀 that lands
// late is pointless.
func (a *Adapter) bucketSpent(bucketID string) bool {
	rl := a.sess.Ratelimiter
	b := rl.GetBucket(bucketID)
	if !b.TryLock() {
		return true
	}
	defer b.Unlock()
	return rl.GetWaitTime(b, 1) > 0
}

// blockAll holds every queue for d: Discord answered a 429 with the global
// flag (50 requests per second per bot).
func (p *pacer) blockAll(d time.Duration) { p.q.BlockAll(d) }

// rateLimited reports how many 429s the pacer has waited out.
func (p *pacer) rateLimited() int { return p.q.RateLimited() }
