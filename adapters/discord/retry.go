package discord

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/marlowe-bot/marlowe/core"
)

// No silent drop. Discord never redelivers a gateway event, so a message
// whose delivery still fails after deliverOnce's tries goes to the durable
// delivery queue (core.DeliveryQueue, in the journal's database) and is
// retried with backoff until RetryFor after it was queued (the approval
// TTL), by whichever replica claims it. A retry claims the same dedupe key
// ("msg:<id>") as the live path, so a message that reached the engine
// another way meanwhile (a RESUME replay, another replica's session) is not
// delivered twice; the engine drops a journaled message id as well. At the
// deadline the delivery is given up with an error log and counted
// (DeliveryRetryStats): never dropped without a trace. Clicks are not
// queued: the person is told at once that the click was not recorded.

// retrier is the delivery queue and its knobs.
type retrier struct {
	q        core.DeliveryQueue
	retryFor time.Duration
	poll     time.Duration // how often due retries are looked for
	base     time.Duration // first backoff; doubles per attempt
	maxWait  time.Duration
	kick     chan struct{}

	queued, redelivered, expired, failed atomic.Uint64
}

// RetryStats counts the delivery queue's work since start.
type RetryStats struct {
	Queued      uint64 // deliveries put on the queue
	Redelivered uint64 // taken from it delivered (or found delivered already)
	Expired     uint64 // given up at their deadline
	Failed      uint64 // retries that failed again
}

// WithDeliveryQueue makes a message that cannot be delivered wait in q and
// be retried with backoff for up to retryFor (the approval TTL; 24 h when
// 0) instead of being dropped after three tries.
func WithDeliveryQueue(q core.DeliveryQueue, retryFor time.Duration) Option {
	return func(a *Adapter) {
		if retryFor <= 0 {
			retryFor = 24 * time.Hour
		}
		a.retry.q, a.retry.retryFor = q, retryFor
	}
}

// DeliveryRetryStats reads the delivery queue's counters.
func (a *Adapter) DeliveryRetryStats() RetryStats {
	r := &a.retry
	return RetryStats{Queued: r.queued.Load(), Redelivered: r.redelivered.Load(), Expired: r.expired.Load(), Failed: r.failed.Load()}
}

// DeliveryBacklog is what waits in the delivery queue for Discord (zero
// without a queue).
func (a *Adapter) DeliveryBacklog(ctx context.Context) (core.DeliveryBacklog, error) {
	if a.retry.q == nil {
		return core.DeliveryBacklog{}, nil
	}
	return a.retry.q.Backlog(ctx, Platform)
}

// queueRetry puts a delivery that failed on the queue, or, without one,
// logs that it is lost.
func (a *Adapter) queueRetry(ctx context.Context, key string, in core.Inbound, cause error) {
	ch := ""
	if in.Event != nil {
		ch = in.Event.Scope.Channel
	}
	if a.retry.q == nil {
		a.log.ErrorContext(ctx, "discord: message not delivered and no delivery queue: lost", "channel", ch, "key", key, "err", cause)
		return
	}
	now := a.now()
	qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	err := a.retry.q.Put(qctx, core.QueuedDelivery{
		Platform: Platform, Key: key, Inbound: in, QueuedAt: now,
		Deadline: now.Add(a.retry.retryFor), NextAt: now.Add(a.retry.base), LastError: cause.Error(),
	})
	if err != nil {
		a.log.ErrorContext(ctx, "discord: message not delivered and not queued: lost", "channel", ch, "key", key, "err", cause, "queue_err", err)
		return
	}
	a.retry.queued.Add(1)
	a.log.WarnContext(ctx, "discord: message not delivered; queued for retry", "channel", ch, "key", key, "err", cause)
	select {
	case a.retry.kick <- struct{}{}:
	default:
	}
}

// retryLoop retries due deliveries until stop.
func (a *Adapter) retryLoop(ctx context.Context, stop chan struct{}) {
	t := time.NewTicker(a.retry.poll)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		case <-t.C:
		case <-a.retry.kick:
		}
		a.retryDue(ctx)
	}
}

// retryDue claims and tries what is due, a batch at a time.
func (a *Adapter) retryDue(ctx context.Context) {
	r := &a.retry
	for ctx.Err() == nil {
		now := a.now()
		due, err := r.q.Claim(ctx, Platform, now, time.Minute, 20)
		if err != nil {
			if ctx.Err() == nil {
				a.log.Warn("discord: delivery queue unreadable", "err", err)
			}
			return
		}
		if len(due) == 0 {
			return
		}
		for _, d := range due {
			a.retryOne(ctx, d)
		}
	}
}

func (a *Adapter) retryOne(ctx context.Context, d core.QueuedDelivery) {
	r := &a.retry
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	now := a.now()
	if !now.Before(d.Deadline) {
		if err := r.q.Ack(sctx, Platform, d.Key); err != nil {
			a.log.Warn("discord: delivery queue ack failed", "key", d.Key, "err", err)
			return
		}
		r.expired.Add(1)
		a.log.Error("discord: queued message given up at its deadline", "key", d.Key, "attempts", d.Attempts, "queued_at", d.QueuedAt, "last_err", d.LastError)
		return
	}
	err := a.deliverAttempt(ctx, d.Key, d.Inbound)
	if ctx.Err() != nil {
		return // due again once the claim lapses
	}
	if err == nil {
		if err := r.q.Ack(sctx, Platform, d.Key); err != nil {
			a.log.Warn("discord: delivery queue ack failed", "key", d.Key, "err", err)
		}
		r.redelivered.Add(1)
		a.log.Info("discord: queued message delivered", "key", d.Key, "attempts", d.Attempts+1)
		return
	}
	r.failed.Add(1)
	wait := r.base << min(d.Attempts+1, 20)
	wait = min(wait, r.maxWait)
	if err := r.q.Retry(sctx, Platform, d.Key, now.Add(wait), err.Error()); err != nil {
		a.log.Warn("discord: delivery queue retry failed", "key", d.Key, "err", err)
	}
}
