// Package delivery is the one inbound-delivery contract every receiver
// shares (Slack, Discord, Telegram, the sandbox): claim a key in a
// dedupe.Deduper, deliver, then commit (delivered: never again) or release
// (failed: a redelivery or a retry may try again), under one deadline policy
// (Policy). Receivers keep only what is theirs: when to acknowledge the
// platform and what a failure means there.
package delivery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/marlowe-bot/marlowe/internal/dedupe"
)

// ErrInFlight means another delivery of the key held its claim for as long
// as this one may wait (Policy: a lease, or the context's deadline). Nothing
// was delivered by this call and it holds no claim: leave the item
// unacknowledged, or retry later.
var ErrInFlight = errors.New("delivery: another delivery of this key is in flight")

// Result says what a successful Deliver did.
type Result int

const (
	// Delivered: fn returned nil under this call's claim (or without one,
	// Policy.FailOpen), and the key is committed.
	Delivered Result = iota
	// Duplicate: the key was delivered before; fn was not called.
	Duplicate
)

// Defaults of Policy's zero fields.
const (
	DefaultLease  = 30 * time.Second
	DefaultTTL    = 15 * time.Minute
	DefaultRetry  = 200 * time.Millisecond
	DefaultSettle = 5 * time.Second

	// firstWait and maxWait bound the pause between two claims of a key
	// another delivery holds: short at first (the holder is usually about
	// to commit), never so long that a lapsed lease waits.
	firstWait = 5 * time.Millisecond
	maxWait   = 250 * time.Millisecond
)

// Policy is the one deadline policy. Receivers differ only in its fields,
// chosen by what their platform does with an unacknowledged item.
type Policy struct {
	// Lease is how long a claim holds before another delivery may take it
	// (a crashed claimer). It also bounds the wait for another holder: past
	// it that holder's lease has lapsed, so a claim then either succeeds or
	// meets a newer holder, and Deliver gives up with ErrInFlight.
	Lease time.Duration
	// TTL is how long a delivered key is remembered: at least as long as
	// the platform redelivers.
	TTL time.Duration
	// Deadline bounds one attempt (claim wait and fn); 0 leaves it to ctx.
	Deadline time.Duration
	// Attempts is how many times a failing fn is tried (values < 1 mean 1:
	// a platform that redelivers retries for us). Attempt n waits
	// (n-1) × Retry first, on the Clock.
	Attempts int
	Retry    time.Duration
	// Settle bounds a commit or release. Both run detached from ctx, so a
	// success that finished after the caller gave up still dedupes the
	// redelivery.
	Settle time.Duration
	// FailOpen delivers without a claim when the Deduper fails (not when
	// ctx ended): for a platform that never redelivers, where refusing
	// loses the item and a duplicate is the lesser harm (the engine also
	// drops a message id it has journaled).
	FailOpen bool
}

func (p Policy) withDefaults() Policy {
	if p.Lease <= 0 {
		p.Lease = DefaultLease
	}
	if p.TTL <= 0 {
		p.TTL = DefaultTTL
	}
	if p.Attempts < 1 {
		p.Attempts = 1
	}
	if p.Retry <= 0 {
		p.Retry = DefaultRetry
	}
	if p.Settle <= 0 {
		p.Settle = DefaultSettle
	}
	return p
}

// Clock is the time the claim wait and the retry pauses are measured on.
// Tests inject one that advances on After, so a lapsing lease is awaited
// without wall-clock sleeps.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

type wallClock struct{}

func (wallClock) Now() time.Time                         { return time.Now() }
func (wallClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Claimer runs the contract for one receiver. It is safe for concurrent use.
type Claimer struct {
	d     dedupe.Deduper
	p     Policy
	clock Clock
	log   *slog.Logger
}

// Option configures a Claimer.
type Option func(*Claimer)

// WithClock measures waits on c instead of the wall clock.
func WithClock(c Clock) Option {
	return func(cl *Claimer) {
		if c != nil {
			cl.clock = c
		}
	}
}

// WithLogger logs on l (ids only, never text).
func WithLogger(l *slog.Logger) Option {
	return func(cl *Claimer) {
		if l != nil {
			cl.log = l
		}
	}
}

// New returns a Claimer on d with policy p (zero fields take the defaults).
func New(d dedupe.Deduper, p Policy, opts ...Option) *Claimer {
	c := &Claimer{d: d, p: p.withDefaults(), clock: wallClock{}, log: slog.New(slog.DiscardHandler)}
	for _, o := range opts {
		o(c)
	}
	return c
}

// Policy returns the policy in force, defaults applied.
func (c *Claimer) Policy() Policy { return c.p }

// Deliver hands key to fn at most once across redeliveries and replicas:
// claim → fn → commit, or release when fn fails, for up to Policy.Attempts
// attempts. It returns nil when the item may be acknowledged (Delivered or
// Duplicate); otherwise the item was not delivered by this call and no claim
// of this call is left held (bar a release that failed, which the lease
// ends): acknowledge nothing.
func (c *Claimer) Deliver(ctx context.Context, key string, fn func(context.Context) error) (Result, error) {
	var err error
	for attempt := 1; attempt <= c.p.Attempts; attempt++ {
		if attempt > 1 {
			if werr := c.pause(ctx, time.Duration(attempt-1)*c.p.Retry); werr != nil {
				return Delivered, errors.Join(err, werr)
			}
		}
		var res Result
		res, err = c.attempt(ctx, key, fn)
		if err == nil || errors.Is(err, ErrInFlight) || ctx.Err() != nil {
			return res, err
		}
	}
	return Delivered, err
}

// Once is one attempt of Deliver, whatever Policy.Attempts, for a caller
// with a retry schedule of its own (a durable queue).
func (c *Claimer) Once(ctx context.Context, key string, fn func(context.Context) error) (Result, error) {
	return c.attempt(ctx, key, fn)
}

func (c *Claimer) attempt(ctx context.Context, key string, fn func(context.Context) error) (Result, error) {
	actx := ctx
	if c.p.Deadline > 0 {
		var cancel context.CancelFunc
		actx, cancel = context.WithTimeout(ctx, c.p.Deadline)
		defer cancel()
	}
	token, done, err := c.claim(actx, key)
	switch {
	case err == nil && done:
		c.log.Debug("delivery: duplicate dropped", "key", key)
		return Duplicate, nil
	case err != nil && (!c.p.FailOpen || errors.Is(err, ErrInFlight) || actx.Err() != nil):
		return Delivered, err
	case err != nil:
		c.log.Warn("delivery: dedupe claim failed; delivering unclaimed", "key", key, "err", err)
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.p.Settle)
	defer cancel()
	if cerr := actx.Err(); cerr != nil {
		// Claimed as the caller gave up: give the key back undelivered, so
		// the redelivery need not wait for the lease.
		c.release(sctx, key, token)
		return Delivered, fmt.Errorf("delivery: %w", cerr)
	}
	ferr := fn(actx)
	if ferr == nil {
		if token != "" {
			if cerr := c.d.Commit(sctx, key, token, c.p.TTL); cerr != nil {
				c.log.Warn("delivery: dedupe commit failed; a redelivery may reach the engine again", "key", key, "err", cerr)
			}
		}
		return Delivered, nil
	}
	c.release(sctx, key, token)
	return Delivered, fmt.Errorf("delivery: deliver: %w", ferr)
}

func (c *Claimer) release(ctx context.Context, key, token string) {
	if token == "" {
		return
	}
	if err := c.d.Release(ctx, key, token); err != nil {
		c.log.Warn("delivery: dedupe release failed; the claim lapses after its lease", "key", key, "err", err)
	}
}

// claim takes key, waiting while another delivery holds it: until that one
// commits (done), releases or lapses (a token), for at most one Lease on
// the Clock, and never past ctx.
func (c *Claimer) claim(ctx context.Context, key string) (token string, done bool, err error) {
	var since time.Time
	wait := firstWait
	for {
		token, done, err = c.d.Claim(ctx, key, c.p.Lease)
		if err != nil {
			return "", false, fmt.Errorf("delivery: dedupe claim: %w", err)
		}
		if done || token != "" {
			return token, done, nil
		}
		now := c.clock.Now()
		if since.IsZero() {
			since = now
			c.log.Debug("delivery: in flight elsewhere; waiting", "key", key)
		} else if now.Sub(since) > c.p.Lease {
			return "", false, ErrInFlight
		}
		if err := c.pause(ctx, wait); err != nil {
			return "", false, fmt.Errorf("%w: %w", ErrInFlight, err)
		}
		wait = min(2*wait, maxWait)
	}
}

func (c *Claimer) pause(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-c.clock.After(d):
		return nil
	}
}
