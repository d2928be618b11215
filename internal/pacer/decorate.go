package pacer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/marlowe-bot/marlowe/core"
)

// ErrDropped is returned by Decorate for a decoration not sent: its
// budget was spent, the bot-wide limit had no slot to spare, or the key
// was rate limited. A decoration is never queued: one that could only go
// later (a 👀 landing after the answer) is pointless.
var ErrDropped = errors.New("pacer: decoration dropped")

// deco is one key's decoration budget, apart from its queue's.
type deco struct {
	bucket       bucket
	blockedUntil time.Time
}

// decosKept bounds the decoration budgets kept; past it, the ones as a
// new key's would be are forgotten.
const decosKept = 4096

// Decorate runs fn at once if key's decoration budget and the bot-wide
// limit allow, and otherwise drops it (ErrDropped) without calling it.
// Decorations (reactions, typing and chat actions) never wait in key's
// queue and never take from its budget, so they never delay what a
// person waits for. A rate-limit refusal of fn drops it too, and holds
// key's decorations (not its queue) for the wait the platform sent. fn
// may drop itself by returning ErrDropped (the platform's own bucket is
// spent); that counts as a drop.
func (p *Pacer[K]) Decorate(ctx context.Context, key K, fn func(context.Context) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	p.mu.Lock()
	now := p.now()
	d := p.decos[key]
	if d == nil {
		if len(p.decos) >= decosKept {
			p.forgetDecos(now)
		}
		iv, burst := time.Duration(0), 1
		if p.cfg.Decoration != nil {
			iv, burst = p.cfg.Decoration(key)
		}
		d = &deco{bucket: newBucket(now, iv, burst)}
		p.decos[key] = d
	}
	ok := !d.blockedUntil.After(now) && !p.globalUntil.After(now) &&
		d.bucket.wait(now, 1) <= 0 && p.global.tryTake(now, true)
	if !ok {
		p.dropped++
		p.mu.Unlock()
		return ErrDropped
	}
	d.bucket.take()
	p.mu.Unlock()

	err := core.ActGuard(ctx)
	if err == nil {
		err = fn(ctx)
	}
	if retry, limited := p.cfg.RetryAfter(err); limited {
		p.mu.Lock()
		d.blockedUntil = p.now().Add(retry)
		p.limited++
		p.dropped++
		p.mu.Unlock()
		if p.cfg.OnLimited != nil {
			p.cfg.OnLimited(ctx, key, retry)
		}
		return fmt.Errorf("%w: %w", ErrDropped, err)
	}
	if errors.Is(err, ErrDropped) {
		// fn found the platform's own bucket spent and sent nothing.
		p.mu.Lock()
		p.dropped++
		p.mu.Unlock()
	}
	return err
}

func (p *Pacer[K]) forgetDecos(now time.Time) {
	for k, d := range p.decos {
		if !d.blockedUntil.After(now) && d.bucket.untilFull(now) <= 0 {
			delete(p.decos, k)
		}
	}
}
