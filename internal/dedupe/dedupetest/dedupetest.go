// Package dedupetest is a conformance suite for implementations of the
// adapters' Deduper (internal/dedupe's in-process one and store/redis's).
package dedupetest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/internal/dedupe"
)

// Deduper is the protocol under test, internal/dedupe.Deduper (which
// adapters/slack.Deduper and the other adapters' Deduper alias).
type Deduper = dedupe.Deduper

// Run checks the claim → commit / release protocol. newDeduper returns a
// fresh, empty deduper (its keys must not collide with other tests').
// Expiry is checked with real sleeps of about a second.
func Run(t *testing.T, newDeduper func(t *testing.T) Deduper) {
	ctx := context.Background()

	t.Run("ClaimCommitDone", func(t *testing.T) {
		d := newDeduper(t)
		tok, done, err := d.Claim(ctx, "T1:C1:1.1", time.Minute)
		if err != nil || done || tok == "" {
			t.Fatalf("first claim = %q, %v, %v; want a token", tok, done, err)
		}
		if tok2, done2, err := d.Claim(ctx, "T1:C1:1.1", time.Minute); err != nil || done2 || tok2 != "" {
			t.Fatalf("claim while in flight = %q, %v, %v; want in-flight", tok2, done2, err)
		}
		if err := d.Commit(ctx, "T1:C1:1.1", tok, 10*time.Minute); err != nil {
			t.Fatal(err)
		}
		if tok3, done3, err := d.Claim(ctx, "T1:C1:1.1", time.Minute); err != nil || !done3 || tok3 != "" {
			t.Fatalf("claim after commit = %q, %v, %v; want done", tok3, done3, err)
		}
	})

	t.Run("ReleaseAllowsRetry", func(t *testing.T) {
		d := newDeduper(t)
		tok, _, err := d.Claim(ctx, "k", time.Minute)
		if err != nil || tok == "" {
			t.Fatalf("claim: %q %v", tok, err)
		}
		if err := d.Release(ctx, "k", tok); err != nil {
			t.Fatal(err)
		}
		tok2, done, err := d.Claim(ctx, "k", time.Minute)
		if err != nil || done || tok2 == "" {
			t.Fatalf("claim after release = %q, %v, %v; want a new token", tok2, done, err)
		}
	})

	t.Run("StaleReleaseKeepsNewClaim", func(t *testing.T) {
		d := newDeduper(t)
		old, _, _ := d.Claim(ctx, "k", 300*time.Millisecond)
		time.Sleep(1100 * time.Millisecond) // lease over (Redis PX granularity is fine)
		tok, done, err := d.Claim(ctx, "k", time.Minute)
		if err != nil || done || tok == "" {
			t.Fatalf("claim after lease expiry = %q, %v, %v", tok, done, err)
		}
		if err := d.Release(ctx, "k", old); err != nil {
			t.Fatal(err)
		}
		if tok2, done2, _ := d.Claim(ctx, "k", time.Minute); tok2 != "" || done2 {
			t.Fatalf("a stale release dropped the live claim (got %q, %v)", tok2, done2)
		}
	})

	t.Run("DoneExpires", func(t *testing.T) {
		d := newDeduper(t)
		tok, _, _ := d.Claim(ctx, "k", time.Minute)
		if err := d.Commit(ctx, "k", tok, 500*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		time.Sleep(1100 * time.Millisecond)
		tok2, done, err := d.Claim(ctx, "k", time.Minute)
		if err != nil || done || tok2 == "" {
			t.Fatalf("claim after TTL = %q, %v, %v; want a fresh claim", tok2, done, err)
		}
	})

	t.Run("ConcurrentClaimsOneWinner", func(t *testing.T) {
		d := newDeduper(t)
		for round := range 5 {
			key := fmt.Sprintf("race-%d", round)
			var winners atomic.Int32
			var wg sync.WaitGroup
			for range 16 {
				wg.Go(func() {
					tok, _, err := d.Claim(ctx, key, time.Minute)
					if err != nil {
						t.Error(err)
						return
					}
					if tok != "" {
						winners.Add(1)
					}
				})
			}
			wg.Wait()
			if n := winners.Load(); n != 1 {
				t.Fatalf("round %d: %d concurrent claims won, want 1", round, n)
			}
		}
	})
}
