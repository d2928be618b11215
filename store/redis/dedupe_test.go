package redis_test

import (
	"context"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/internal/dedupe/dedupetest"
	"github.com/marlowe-bot/marlowe/internal/testredis"
	"github.com/marlowe-bot/marlowe/store/redis"
)

func TestDeduperConformance(t *testing.T) {
	dedupetest.Run(t, func(t *testing.T) dedupetest.Deduper {
		c := testredis.Client(t, 0)
		return redis.NewDeduper(c, testredis.Prefix(t, c))
	})
}

// TestDeduperKeysHoldIDsOnly checks the stored layout: the key is the
// prefix + the id, the value is a claim or "done", and the TTL is set.
func TestDeduperKeysHoldIDsOnly(t *testing.T) {
	c := testredis.Client(t, 0)
	prefix := testredis.Prefix(t, c)
	d := redis.NewDeduper(c, prefix)
	ctx := context.Background()

	tok, done, err := d.Claim(ctx, "T1:C1:1700000000.000100", 30*time.Second)
	if err != nil || done || tok == "" {
		t.Fatalf("claim: %q %v %v", tok, done, err)
	}
	key := prefix + "d:T1:C1:1700000000.000100"
	if v := c.Get(ctx, key).Val(); v != "c:"+tok {
		t.Fatalf("claim value = %q", v)
	}
	if ttl := c.PTTL(ctx, key).Val(); ttl <= 0 || ttl > 30*time.Second {
		t.Fatalf("claim TTL = %v", ttl)
	}
	if err := d.Commit(ctx, "T1:C1:1700000000.000100", tok, 15*time.Minute); err != nil {
		t.Fatal(err)
	}
	if v := c.Get(ctx, key).Val(); v != "done" {
		t.Fatalf("done value = %q", v)
	}
	if ttl := c.PTTL(ctx, key).Val(); ttl < 14*time.Minute || ttl > 15*time.Minute {
		t.Fatalf("done TTL = %v, want about 15m", ttl)
	}
	keys, err := c.Keys(ctx, prefix+"*").Result()
	if err != nil || len(keys) != 1 {
		t.Fatalf("keys under prefix = %v, %v; want exactly one", keys, err)
	}
}

// TestDeduperAcrossReplicas: two adapters' dedupers on one Redis see each
// other's deliveries.
func TestDeduperAcrossReplicas(t *testing.T) {
	c := testredis.Client(t, 0)
	prefix := testredis.Prefix(t, c)
	a, b := redis.NewDeduper(c, prefix), redis.NewDeduper(c, prefix)
	ctx := context.Background()
	tok, _, _ := a.Claim(ctx, "T:C:1.2", time.Minute)
	if tok2, done, _ := b.Claim(ctx, "T:C:1.2", time.Minute); tok2 != "" || done {
		t.Fatalf("replica b claimed a key replica a holds")
	}
	if err := a.Commit(ctx, "T:C:1.2", tok, 10*time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, done, _ := b.Claim(ctx, "T:C:1.2", time.Minute); !done {
		t.Fatalf("replica b does not see replica a's delivery")
	}
}
