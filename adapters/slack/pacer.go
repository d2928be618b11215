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

// Slack counts per method (docs/slack.md, "Pacing"): chat.postMessage
// about one a second per channel; every other method has a tier, counted
// per method per workspace: Tier 2 is 20+ a minute, Tier 3 50+ (sporadic
// bursts welcome), Tier 4 100+ (generous bursts). A tier's budget here is
// one call per its documented minimum after a burst (the bursts are a
// choice: Slack publishes no number for them).
const (
	tier2Interval = time.Minute / 20
	tier2Burst    = 5
	tier3Interval = time.Minute / 50
	tier3Burst    = 10
	tier4Interval = time.Minute / 100
	tier4Burst    = 20
)

// lookupTier is the documented tier of each paced lookup (the method's
// page in Slack's reference), as an interval and burst; ok false for a key
// that is not one (a channel id: its history reads are spaced by the
// history gate instead).
func lookupTier(method string) (iv time.Duration, burst int, ok bool) {
	switch method {
	case "users.list": // Tier 2
		return tier2Interval, tier2Burst, true
	case "conversations.info", "conversations.open": // Tier 3
		return tier3Interval, tier3Burst, true
	case "conversations.members", "users.info", "views.publish", // Tier 4
		"chat.getPermalink": // "Special rate limits apply": counted as Tier 4
		return tier4Interval, tier4Burst, true
	}
	return 0, 1, false
}

// Keys of the workspace-wide budgets (channel ids never look like these).
const (
	keyReactions = "reactions.add"
	keyStatus    = "assistant.threads.setStatus"
)

// pacer runs Web API writes (internal/pacer). Messages and stream calls
// queue per channel at chat.postMessage's pace: priorities, coalesced
// edits, a token bucket. chat.update queues apart, per channel at the same
// pace, so a checklist edit never takes a channel's message budget; its
// workspace-wide Tier 3 is left to Slack's 429s (the engine waits for a
// run's last checklist edit: a 50-a-minute queue for the whole workspace
// held runs for minutes at 100 mentions a second). Reactions and the
// thread status are decorations: sent at once on their own Tier 3 budget
// or dropped. A file upload goes in the channel's message queue, as the
// message it is. History reads (conversations.replies/history) queue per
// channel apart from everything else, unpaced there (the history gate,
// WithHistoryInterval, spaces them), so a read never takes an answer's
// budget. The other lookups (conversations.info/.open/.members, users.info,
// users.list, chat.getPermalink) and views.publish queue in the same
// pacer, one queue per method (Slack's tiers count per method per
// workspace), each on its tier's budget (lookupTier). On a 429 the Retry-After Slack sent is waited out before the
// same call is sent again, in every queue.
type pacer struct {
	q     *pq.Pacer[string]
	upd   *pq.Pacer[string]
	reads *pq.Pacer[string]
	now   func() time.Time
	waits pq.Waits
}

func newPacer(now func() time.Time, after func(time.Duration) <-chan time.Time, cfg paceConfig, log *slog.Logger) *pacer {
	retry := func(err error) (time.Duration, bool) {
		var rl *slack.RateLimitedError
		if errors.As(err, &rl) {
			return max(rl.RetryAfter, time.Second), true
		}
		return 0, false
	}
	onLimited := func(ctx context.Context, key string, retry time.Duration) {
		log.WarnContext(ctx, "slack: rate limited; waiting as told", "channel", key, "retry_after", retry)
	}
	tier3 := func(string) (time.Duration, int) {
		if cfg.interval <= 0 {
			return 0, 1 // pacing off (tests): every budget
		}
		return tier3Interval, tier3Burst
	}
	return &pacer{
		now: now,
		q: pq.New(now, pq.Config[string]{
			Rate:       func(string) (time.Duration, int) { return cfg.interval, cfg.burst },
			Decoration: tier3,
			RetryAfter: retry,
			OnLimited:  onLimited,
			After:      after,
		}),
		upd: pq.New(now, pq.Config[string]{
			Rate:       func(string) (time.Duration, int) { return cfg.interval, cfg.burst },
			RetryAfter: retry,
			OnLimited:  onLimited,
			After:      after,
		}),
		reads: pq.New(now, pq.Config[string]{
			Rate: func(key string) (time.Duration, int) {
				iv, burst, ok := lookupTier(key)
				if !ok || cfg.interval <= 0 {
					return 0, 1 // a channel's history reads, or pacing off (tests)
				}
				return iv, burst
			},
			RetryAfter: retry,
			OnLimited:  onLimited,
			After:      after,
		}),
	}
}

// do runs fn in channel's queue and returns its error. coalesce, for
// PriorityEdit calls, names the message being edited: a queued edit with the
// same name is replaced by this one and both callers get its result.
func (p *pacer) do(ctx context.Context, channel string, prio core.Priority, coalesce string, fn func(context.Context) error) error {
	return p.timed(ctx, p.q, "", channel, prio, coalesce, fn)
}

// send is do for a named method: its wait is reported per method.
func (p *pacer) send(ctx context.Context, method, channel string, prio core.Priority, coalesce string, fn func(context.Context) error) error {
	return p.timed(ctx, p.q, method, channel, prio, coalesce, fn)
}

// update runs a chat.update in channel's queue of updates.
func (p *pacer) update(ctx context.Context, channel string, prio core.Priority, coalesce string, fn func(context.Context) error) error {
	return p.timed(ctx, p.upd, "chat.update", channel, prio, coalesce, fn)
}

// read runs a history read (method) in channel's queue of reads.
func (p *pacer) read(ctx context.Context, method, channel string, fn func(context.Context) error) error {
	return p.timed(ctx, p.reads, method, channel, core.PriorityNormal, "", fn)
}

// lookup runs a call of method in method's queue of the reads, on the
// method's tier (lookupTier): a 429's Retry-After is waited out and the
// call sent again. fn's results are to be read only once lookup returned
// nil (a caller whose ctx ended may leave the call running).
func (p *pacer) lookup(ctx context.Context, method string, fn func(context.Context) error) error {
	return p.read(ctx, method, method, fn)
}

// lookupReady reports whether a call of method would go at once on its
// tier, without waiting behind other lookups or for budget.
func (p *pacer) lookupReady(method string) bool { return p.reads.Ready(method) }

func (p *pacer) timed(ctx context.Context, q *pq.Pacer[string], method, key string, prio core.Priority, coalesce string, fn func(context.Context) error) error {
	if method == "" {
		return q.Do(ctx, key, prio, coalesce, fn)
	}
	t0 := p.now()
	return q.Do(ctx, key, prio, coalesce, func(ctx context.Context) error {
		p.waited(method, p.now().Sub(t0))
		return fn(ctx)
	})
}

// decorate sends a reaction or a thread status now, or drops it (nil: a
// decoration not shown costs nothing) when the method's budget is spent.
func (p *pacer) decorate(ctx context.Context, method string, fn func(context.Context) error) error {
	return pq.DecorateOrDrop(ctx, p.q, &p.waits, method, method, fn)
}

func (p *pacer) waited(method string, d time.Duration) { p.waits.Waited(method, d) }

// stats sums the queues.
func (p *pacer) stats() pq.Stats {
	var sum pq.Stats
	for _, q := range []*pq.Pacer[string]{p.q, p.upd, p.reads} {
		s := q.Stats()
		sum.Queued, sum.RateLimited, sum.Dropped = sum.Queued+s.Queued, sum.RateLimited+s.RateLimited, sum.Dropped+s.Dropped
	}
	return sum
}
