package redis_test

import (
	"context"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/internal/testredis"
	"github.com/marlowe-bot/marlowe/store/redis"
)

// TestKVFirstWriterWinsAndExpires: two replicas' KVs on one Redis see one
// value, the first written; a second SetNX changes nothing; the value
// lapses after its TTL, and then a new one may be set.
func TestKVFirstWriterWinsAndExpires(t *testing.T) {
	c := testredis.Client(t, 0)
	prefix := testredis.Prefix(t, c)
	a, b := redis.NewKV(c, prefix), redis.NewKV(c, prefix)
	ctx := context.Background()

	if _, ok, err := b.Get(ctx, "answer:1"); ok || err != nil {
		t.Fatalf("get of a missing key: %v %v", ok, err)
	}
	if ok, err := a.SetNX(ctx, "answer:1", []byte("k1"), 300*time.Millisecond); !ok || err != nil {
		t.Fatalf("first SetNX: %v %v", ok, err)
	}
	if ok, err := b.SetNX(ctx, "answer:1", []byte("k2"), time.Minute); ok || err != nil {
		t.Fatalf("second SetNX stored (%v, %v): the first writer must win", ok, err)
	}
	if v, ok, err := b.Get(ctx, "answer:1"); !ok || err != nil || string(v) != "k1" {
		t.Fatalf("other replica reads %q %v %v, want k1", v, ok, err)
	}
	if ttl := c.PTTL(ctx, prefix+"answer:1").Val(); ttl <= 0 || ttl > 300*time.Millisecond {
		t.Fatalf("TTL %v, want at most 300ms", ttl)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, ok, _ := a.Get(ctx, "answer:1"); !ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the value never expired")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if ok, err := b.SetNX(ctx, "answer:1", []byte("k3"), time.Minute); !ok || err != nil {
		t.Fatalf("SetNX after expiry: %v %v", ok, err)
	}
}
