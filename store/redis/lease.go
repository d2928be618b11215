package redis

// This file is a single-holder lease (used by adapters/telegram to elect
// the one poller per bot token): SET NX PX with a random holder token,
// renewed by a compare-and-PEXPIRE script, released by compare-and-DEL,
// with a fencing token (INCR) per acquisition.

import (
	"context"
	"fmt"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// Keys (P = the prefix given at construction):
//
//	P l:<name>        "<fence>:<holder token>"  PX ttl   the lease
//	P l:<name>:fence  counter                             fencing tokens

const leaseRenewLua = `
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
`

// Lease is a Redis-backed lease shared by replicas: at most one holds a
// name at a time. It satisfies adapters/telegram.Lease.
type Lease struct {
	rdb     goredis.UniversalClient
	prefix  string
	ttl     time.Duration
	renew   *goredis.Script
	release *goredis.Script
}

// NewLease returns a lease manager on rdb; a held lease lapses ttl after
// its holder stops renewing (it renews every ttl/3).
func NewLease(rdb goredis.UniversalClient, prefix string, ttl time.Duration) *Lease {
	if ttl < 300*time.Millisecond {
		ttl = 300 * time.Millisecond
	}
	return &Lease{rdb: rdb, prefix: prefix, ttl: ttl,
		renew: goredis.NewScript(leaseRenewLua), release: goredis.NewScript(dedupeReleaseLua)}
}

type fenceKey struct{}

// Fence returns the fencing token of the lease held by ctx (from
// Acquire): it grows with every acquisition of the name, so a write stamped
// with it can be refused once a newer holder exists.
func Fence(held context.Context) (int64, bool) {
	f, ok := held.Value(fenceKey{}).(int64)
	return f, ok
}

// Acquire blocks until this caller holds name or ctx ends. The returned
// context ends when the lease is lost (a renewal failed or found another
// holder) or ctx ends; release gives the lease up.
func (l *Lease) Acquire(ctx context.Context, name string) (context.Context, func(), error) {
	key := l.prefix + "l:" + name
	tok, err := dedupeToken()
	if err != nil {
		return nil, nil, err
	}
	poll := l.ttl / 3
	for {
		// An error (Redis unreachable) is a lease not taken: keep trying.
		if fence, ok, _ := l.try(ctx, key, tok); ok {
			return l.hold(ctx, key, fmt.Sprintf("%d:%s", fence, tok), fence)
		}
		t := time.NewTimer(poll)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, nil, ctx.Err()
		case <-t.C:
		}
	}
}

// try takes the lease if it is free. The fencing token is drawn first, so
// a holder's token is always above every earlier holder's.
func (l *Lease) try(ctx context.Context, key, tok string) (int64, bool, error) {
	if n, err := l.rdb.Exists(ctx, key).Result(); err != nil || n > 0 {
		return 0, false, err
	}
	fence, err := l.rdb.Incr(ctx, key+":fence").Result()
	if err != nil {
		return 0, false, err
	}
	ok, err := l.rdb.SetNX(ctx, key, fmt.Sprintf("%d:%s", fence, tok), l.ttl).Result()
	return fence, ok, err
}

func (l *Lease) hold(ctx context.Context, key, val string, fence int64) (context.Context, func(), error) {
	held, cancel := context.WithCancel(context.WithValue(ctx, fenceKey{}, fence))
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(l.ttl / 3)
		defer t.Stop()
		for {
			select {
			case <-held.Done():
				return
			case <-t.C:
			}
			rctx, rcancel := context.WithTimeout(held, l.ttl/3)
			n, err := l.renew.Run(rctx, l.rdb, []string{key}, val, l.ttl.Milliseconds()).Int64()
			rcancel()
			if held.Err() != nil {
				return
			}
			if err != nil || n == 0 {
				// Lost (taken over, expired) or unknowable: stop now rather
				// than risk two holders.
				cancel()
				return
			}
		}
	}()
	release := func() {
		cancel()
		<-done
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer rcancel()
		_ = l.release.Run(rctx, l.rdb, []string{key}, val).Err()
	}
	return held, release, nil
}
