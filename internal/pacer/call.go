package pacer

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/marlowe-bot/marlowe/core"
)

// Call runs fn, a call that belongs to no key's queue (a read such as
// Telegram's getFile or getChatMember, a callback's answer, a long poll),
// once the bot-wide limit has a slot for it: it takes from no key's budget
// but counts towards the limit every call shares. A PriorityEdit call
// leaves the headroom free, as an edit or a decoration does, so what a
// person waits for still goes first; a higher one may use it. The wait is
// on the pacer's clock and ends with ctx. On a rate-limit refusal of fn the
// wait the platform sent is waited out and fn is called again (OnLimited
// is told with the zero key: the call has none). Without a bot-wide limit
// fn runs at once (a refusal is still waited out).
func (p *Pacer[K]) Call(ctx context.Context, prio core.Priority, fn func(context.Context) error) error {
	low := prio <= core.PriorityEdit
	for {
		p.mu.Lock()
		now := p.now()
		wait := p.globalUntil.Sub(now)
		if wait <= 0 && !p.global.tryTake(now, low) {
			wait = max(p.global.wait(now, low), time.Millisecond)
		}
		p.mu.Unlock()
		if wait <= 0 {
			err := fn(ctx)
			retry, limited := p.cfg.RetryAfter(err)
			if !limited {
				return err
			}
			trace.SpanFromContext(ctx).AddEvent("marlowe.rate_limited", trace.WithAttributes(attribute.Float64("marlowe.retry_after_seconds", retry.Seconds())))
			p.mu.Lock()
			p.limited++
			p.mu.Unlock()
			if p.cfg.OnLimited != nil {
				var none K
				p.cfg.OnLimited(ctx, none, retry)
			}
			wait = retry
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		select {
		case <-p.after(wait):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
