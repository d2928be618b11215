package lanes_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/internal/lanes"
)

type item struct {
	key string
	n   int
}

func TestOneKeyRunsInOrder(t *testing.T) {
	var mu sync.Mutex
	got := map[string][]int{}
	l := lanes.New(8, 4, func(it item) {
		mu.Lock()
		got[it.key] = append(got[it.key], it.n)
		mu.Unlock()
	})
	want := map[string][]int{}
	for n := range 300 {
		k := fmt.Sprintf("k%d", n%3)
		want[k] = append(want[k], n)
		if err := l.Add(context.Background(), k, item{k, n}); err != nil {
			t.Fatal(err)
		}
	}
	l.Wait()
	for k, w := range want {
		if !slices.Equal(got[k], w) {
			t.Errorf("%s ran %v, want %v", k, got[k], w)
		}
	}
}

// The attack a fixed set of shards fails: a key whose item is stuck holds
// back its own later items only, never another key's.
func TestAStuckKeyDelaysNoOtherKey(t *testing.T) {
	release := make(chan struct{})
	ran := make(chan item, 16)
	l := lanes.New(16, 2, func(it item) {
		if it.key == "stuck" {
			<-release
		}
		ran <- it
	})
	ctx := context.Background()
	_ = l.Add(ctx, "stuck", item{"stuck", 0})
	_ = l.Add(ctx, "stuck", item{"stuck", 1})
	for n := range 5 {
		_ = l.Add(ctx, fmt.Sprintf("free%d", n), item{fmt.Sprintf("free%d", n), n})
	}
	for range 5 {
		select {
		case it := <-ran:
			if it.key == "stuck" {
				t.Fatalf("the stuck key ran before its release: %+v", it)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("a free key waited behind the stuck one")
		}
	}
	close(release)
	for want := range 2 {
		if it := <-ran; it.key != "stuck" || it.n != want {
			t.Fatalf("after release ran %+v, want stuck %d", it, want)
		}
	}
	l.Wait()
}

// At the limit Add waits (back-pressure, nothing dropped) and gives up with
// ctx's error.
func TestAddWaitsAtTheLimit(t *testing.T) {
	release := make(chan struct{})
	var mu sync.Mutex
	ran := 0
	l := lanes.New(2, 2, func(item) {
		<-release
		mu.Lock()
		ran++
		mu.Unlock()
	})
	ctx := context.Background()
	_ = l.Add(ctx, "a", item{"a", 0})
	_ = l.Add(ctx, "b", item{"b", 0})
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := l.Add(short, "c", item{"c", 0}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Add over the limit = %v, want it to wait until the deadline", err)
	}
	added := make(chan error, 1)
	go func() { added <- l.Add(ctx, "c", item{"c", 1}) }()
	close(release)
	if err := <-added; err != nil {
		t.Fatal(err)
	}
	l.Wait()
	if ran != 3 {
		t.Fatalf("ran %d items, want 3", ran)
	}
}

// No more than the running bound run at once, whatever the keys.
func TestRunningIsBounded(t *testing.T) {
	var mu sync.Mutex
	now, peak := 0, 0
	l := lanes.New(64, 3, func(item) {
		mu.Lock()
		now++
		peak = max(peak, now)
		mu.Unlock()
		time.Sleep(2 * time.Millisecond)
		mu.Lock()
		now--
		mu.Unlock()
	})
	for n := range 40 {
		_ = l.Add(context.Background(), fmt.Sprintf("k%d", n), item{n: n})
	}
	l.Wait()
	if peak != 3 {
		t.Fatalf("at most %d ran at once, want 3", peak)
	}
}

// Drain runs what was queued when it is called, and past its timeout ends
// the rest through cancel instead of waiting on them.
func TestDrain(t *testing.T) {
	for _, tc := range []struct {
		name    string
		stuck   bool
		timeout time.Duration
		want    bool
	}{
		{"everything runs", false, 10 * time.Second, true},
		{"a stuck item is cancelled", true, 50 * time.Millisecond, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			gate := make(chan struct{})
			var ran atomic.Int32
			l := lanes.New(16, 4, func(stuck bool) {
				<-gate
				if stuck {
					<-ctx.Done()
					return
				}
				ran.Add(1)
			})
			for i := range 5 {
				if err := l.Add(t.Context(), "k", tc.stuck && i == 0); err != nil {
					t.Fatal(err)
				}
			}
			close(gate) // queued before the stop, released after it
			if got := l.Drain(tc.timeout, cancel); got != tc.want {
				t.Fatalf("Drain = %v, want %v", got, tc.want)
			}
			if ctx.Err() == nil {
				t.Fatal("Drain did not call cancel")
			}
			if want := map[bool]int32{false: 5, true: 4}[tc.stuck]; ran.Load() != want {
				t.Fatalf("%d items ran, want %d", ran.Load(), want)
			}
		})
	}
}
