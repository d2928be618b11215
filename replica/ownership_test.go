package replica_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/coretest"
	"github.com/marlowe-bot/marlowe/replica"
)

// Two replicas on one lease table: one holds a channel, the other's claim
// fails until the holder releases it; a fence that is no longer the
// channel's current one may not act.
func TestOwnershipOneOwnerPerChannel(t *testing.T) {
	ctx := t.Context()
	j := coretest.NewMemJournal(coretest.NewSigner(t))
	a := replica.NewOwnership(j, "a", 10*time.Second)
	b := replica.NewOwnership(j, "b", 10*time.Second)
	ch := core.Scope{Platform: "slack", Workspace: "T1", Channel: "C1"}.Key()

	fa, ok, fresh, err := a.Claim(ctx, ch)
	if err != nil || !ok || !fresh {
		t.Fatalf("a claims: ok=%v fresh=%v err=%v", ok, fresh, err)
	}
	if _, ok, fresh, err := a.Claim(ctx, ch); err != nil || !ok || fresh {
		t.Fatalf("a claims again: ok=%v fresh=%v err=%v, want held, not fresh", ok, fresh, err)
	}
	if _, ok, _, err := b.Claim(ctx, ch); err != nil || ok {
		t.Fatalf("b claims a held channel: ok=%v err=%v", ok, err)
	}
	if err := a.MayAct(fa); err != nil {
		t.Fatalf("owner may not act: %v", err)
	}
	if _, owned := b.Owns(ch); owned {
		t.Fatal("b owns a's channel")
	}
	if lost, asked, err := a.Renew(ctx); err != nil || asked != 1 || len(lost) != 0 {
		t.Fatalf("renew: lost=%v asked=%d err=%v", lost, asked, err)
	}

	if n, err := a.Release(ctx, []core.ChannelKey{ch}); err != nil || n != 1 {
		t.Fatalf("release: %d, %v", n, err)
	}
	if err := a.MayAct(fa); !errors.Is(err, replica.ErrLeaseLost) {
		t.Fatalf("after release a may act: %v", err)
	}
	fb, ok, fresh, err := b.Claim(ctx, ch)
	if err != nil || !ok || !fresh {
		t.Fatalf("b claims the released channel: ok=%v fresh=%v err=%v", ok, fresh, err)
	}
	if fb.Token <= fa.Token {
		t.Fatalf("fence did not advance: %d then %d", fa.Token, fb.Token)
	}
	if b.Owned() != 1 || a.Owned() != 0 {
		t.Fatalf("owned: a %d, b %d", a.Owned(), b.Owned())
	}
}

// A replica that cannot renew keeps its books but stops acting once less
// than a quarter of the TTL surely remains, and reports unhealthy after a
// TTL without renewal.
func TestOwnershipStaleLeaseMayNotAct(t *testing.T) {
	ctx := t.Context()
	j := coretest.NewMemJournal(coretest.NewSigner(t))
	const ttl = 20 * time.Second
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	o := replica.NewOwnership(renewFails{j}, "a", ttl, replica.WithClock(clock))
	ch := core.Scope{Platform: "slack", Workspace: "T1", Channel: "C1"}.Key()
	f, ok, _, err := o.Claim(ctx, ch)
	if err != nil || !ok {
		t.Fatalf("claim: %v %v", ok, err)
	}
	if _, _, err := o.Renew(ctx); err == nil {
		t.Fatal("renew against a failing table succeeded")
	}
	advance(ttl/2 + time.Second) // less than half the TTL left: still safe
	if err := o.MayAct(f); err != nil {
		t.Fatalf("MayAct with %s left = %v", ttl/2-time.Second, err)
	}
	advance(ttl / 4) // less than a quarter left
	if err := o.MayAct(f); !errors.Is(err, replica.ErrLeaseStale) {
		t.Fatalf("MayAct = %v, want ErrLeaseStale", err)
	}
	if err := o.Health(); err != nil {
		t.Fatalf("unhealthy before a TTL without renewal: %v", err)
	}
	advance(ttl / 4)
	if err := o.Health(); err == nil {
		t.Fatal("healthy after a TTL without renewals")
	}
}

// Presence: each replica counts the others alive.
func TestOwnershipCountsPeers(t *testing.T) {
	ctx := t.Context()
	j := coretest.NewMemJournal(coretest.NewSigner(t))
	a := replica.NewOwnership(j, "a", 10*time.Second)
	if a.Alone() {
		t.Fatal("alone before any presence check")
	}
	a.CountPeers(ctx)
	if !a.Alone() {
		t.Fatal("not alone with no other replica")
	}
	b := replica.NewOwnership(j, "b", 10*time.Second)
	b.CountPeers(ctx)
	a.CountPeers(ctx)
	if a.Alone() || b.Alone() {
		t.Fatalf("alone with a peer: a %v, b %v", a.Alone(), b.Alone())
	}
	if _, err := b.ReleaseAll(ctx); err != nil {
		t.Fatal(err)
	}
	a.CountPeers(ctx)
	if !a.Alone() {
		t.Fatal("a peer that released its presence still counts")
	}
}
