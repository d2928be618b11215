package replica

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"time"

	"github.com/marlowe-bot/marlowe/core"
)

// Elector turns the lease table into single-holder elections: the one
// Telegram poller per bot token, the one replica that fires routines. It is
// the same lease mechanism as channel ownership (ARCHITECTURE.md section 9),
// so a Redis restart cannot elect two.
type Elector struct {
	leases core.Leases
	holder string
	ttl    time.Duration
}

// NewElector elects among replicas through l; each Elector is one
// candidate (a random suffix is added to holder).
func NewElector(l core.Leases, holder string, ttl time.Duration) *Elector {
	if ttl < time.Second {
		ttl = time.Second
	}
	return &Elector{leases: l, holder: holderName(holder), ttl: ttl}
}

type electFenceKey struct{}

// ElectedFence returns the fence of the election held by ctx (from Acquire).
func ElectedFence(held context.Context) (core.Fence, bool) {
	f, ok := held.Value(electFenceKey{}).(core.Fence)
	return f, ok
}

// Acquire blocks until this candidate holds name or ctx ends. The returned
// context ends when the lease is lost (a renewal failed or found another
// holder) or ctx ends; release gives it up (call it exactly once).
func (el *Elector) Acquire(ctx context.Context, name string) (context.Context, func(), error) {
	for {
		f, ok, err := el.leases.Acquire(ctx, name, el.holder, el.ttl)
		if err == nil && ok {
			return el.hold(ctx, f)
		}
		t := time.NewTimer(el.ttl / 3)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, nil, fmt.Errorf("acquire %s: %w", name, ctx.Err())
		case <-t.C:
		}
	}
}

func (el *Elector) hold(ctx context.Context, f core.Fence) (context.Context, func(), error) {
	held, cancel := context.WithCancel(context.WithValue(ctx, electFenceKey{}, f))
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(el.ttl / 3)
		defer t.Stop()
		for {
			select {
			case <-held.Done():
				return
			case <-t.C:
			}
			rctx, rcancel := context.WithTimeout(held, el.ttl/3)
			names, err := el.leases.Renew(rctx, el.holder, el.ttl, f.Name)
			rcancel()
			if held.Err() != nil {
				return
			}
			if err != nil || len(names) == 0 {
				// Lost, or unknowable: stop rather than risk two holders.
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
		_ = el.leases.Release(rctx, el.holder, f.Name)
	}
	return held, release, nil
}

// holderName names this process in the lease table: the configured name
// (default host and pid) and a random suffix.
func holderName(name string) string {
	if name == "" {
		host, _ := os.Hostname()
		name = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	return name + "-" + hex.EncodeToString(b[:])
}
