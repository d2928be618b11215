package delivery_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/internal/dedupe"
	"github.com/marlowe-bot/marlowe/internal/delivery"
	"github.com/marlowe-bot/marlowe/internal/delivery/deliverytest"
	"github.com/marlowe-bot/marlowe/internal/pacer/pacertest"
	"github.com/marlowe-bot/marlowe/internal/testredis"
	"github.com/marlowe-bot/marlowe/store/redis"
)

func TestContractMemory(t *testing.T) {
	deliverytest.Run(t, func(t *testing.T) deliverytest.Harness {
		clk := pacertest.New()
		return deliverytest.Harness{Deduper: dedupe.NewMemory(clk.Now), Clock: clk}
	})
}

func TestContractRedis(t *testing.T) {
	deliverytest.Run(t, func(t *testing.T) deliverytest.Harness {
		c := testredis.Client(t, 0)
		return deliverytest.Harness{Deduper: redis.NewDeduper(c, testredis.Prefix(t, c))}
	})
}

// broken fails every call, like an unreachable Redis.
type broken struct{}

var errDown = errors.New("redis down")

func (broken) Claim(context.Context, string, time.Duration) (string, bool, error) {
	return "", false, errDown
}
func (broken) Commit(context.Context, string, string, time.Duration) error { return errDown }
func (broken) Release(context.Context, string, string) error               { return errDown }

// TestDeduperDown: a platform that redelivers refuses (the item stays
// unacknowledged); one that never does delivers unclaimed (FailOpen).
func TestDeduperDown(t *testing.T) {
	for _, tc := range []struct {
		name     string
		failOpen bool
		calls    int
	}{{"refuse", false, 0}, {"fail open", true, 1}} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			_, err := delivery.New(broken{}, delivery.Policy{FailOpen: tc.failOpen}).Deliver(t.Context(), "k", func(context.Context) error { calls++; return nil })
			if calls != tc.calls || (err == nil) != tc.failOpen {
				t.Fatalf("%d calls, err %v", calls, err)
			}
		})
	}
}
