package redis_test

import (
	"context"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/adapters/telegram"
	"github.com/marlowe-bot/marlowe/internal/testredis"
	"github.com/marlowe-bot/marlowe/store/redis"
)

var _ telegram.Lease = (*redis.Lease)(nil)

// Two replicas want one lease: one holds it (and keeps it by renewing past
// its TTL), the other waits; release hands it over with a higher fencing
// token; a holder whose lease is taken from it (expired, overwritten) sees
// its context end at the next renewal.
func TestLeaseSingleHolder(t *testing.T) {
	c := testredis.Client(t, 0)
	prefix := testredis.Prefix(t, c)
	ttl := 300 * time.Millisecond
	a, b := redis.NewLease(c, prefix, ttl), redis.NewLease(c, prefix, ttl)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	heldA, releaseA, err := a.Acquire(ctx, "poller:1")
	if err != nil {
		t.Fatal(err)
	}
	fenceA, _ := redis.Fence(heldA)

	got := make(chan context.Context, 1)
	var releaseB func()
	go func() {
		h, r, err := b.Acquire(ctx, "poller:1")
		if err != nil {
			t.Error(err)
			close(got)
			return
		}
		releaseB = r
		got <- h
	}()
	// Three TTLs: A renews, B keeps waiting.
	select {
	case <-got:
		t.Fatal("B acquired a lease A holds")
	case <-heldA.Done():
		t.Fatal("A lost its lease while renewing")
	case <-time.After(3 * ttl):
	}
	releaseA()
	heldB := <-got
	if heldB == nil {
		t.Fatal("B never acquired")
	}
	fenceB, _ := redis.Fence(heldB)
	if fenceB <= fenceA {
		t.Fatalf("fencing token %d after %d: want it to grow", fenceB, fenceA)
	}

	// Someone else takes the key (B's renewals stopped long enough, or an
	// operator cleared it): B's context ends.
	if err := c.Set(ctx, prefix+"l:poller:1", "999:intruder", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-heldB.Done():
	case <-time.After(5 * ttl):
		t.Fatal("B kept polling after losing its lease")
	}
	releaseB()
	if v := c.Get(ctx, prefix+"l:poller:1").Val(); v != "999:intruder" {
		t.Fatalf("release deleted a lease it no longer held (value %q)", v)
	}
}
