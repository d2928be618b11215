package pacer_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/internal/pacer"
)

// errLimited stands for a platform's 429.
type errLimited struct{ after time.Duration }

func (e errLimited) Error() string { return fmt.Sprintf("429, retry after %v", e.after) }

func retryAfter(err error) (time.Duration, bool) {
	var l errLimited
	if errors.As(err, &l) {
		return l.after, true
	}
	return 0, false
}

func unpaced[K comparable]() pacer.Config[K] {
	return pacer.Config[K]{Rate: func(K) (time.Duration, int) { return 0, 1 }, RetryAfter: retryAfter}
}

// recorder is a call log safe for the pacer's goroutines.
type recorder struct {
	mu  sync.Mutex
	got []string
}

func (r *recorder) call(name string, err error) func(context.Context) error {
	return func(context.Context) error {
		r.mu.Lock()
		r.got = append(r.got, name)
		r.mu.Unlock()
		return err
	}
}

func (r *recorder) calls() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

// hold occupies key's queue until the returned func is called, so later
// calls queue up behind it.
func hold[K comparable](t *testing.T, p *pacer.Pacer[K], key K, wg *sync.WaitGroup) (release func()) {
	t.Helper()
	running, gate := make(chan struct{}), make(chan struct{})
	wg.Go(func() {
		_ = p.Do(t.Context(), key, core.PriorityHigh, "", func(context.Context) error {
			close(running)
			<-gate
			return nil
		})
	})
	<-running
	return func() { close(gate) }
}

func await(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestPriorityOrder(t *testing.T) {
	p := pacer.New(time.Now, unpaced[string]())
	var wg sync.WaitGroup
	release := hold(t, p, "C1", &wg)
	var r recorder
	want := map[core.Priority]int{core.PriorityHigh: 1} // hold's call is queued until it returns
	for _, c := range []struct {
		name string
		prio core.Priority
	}{
		{"edit", core.PriorityEdit}, {"normal-1", core.PriorityNormal}, {"high", core.PriorityHigh}, {"normal-2", core.PriorityNormal},
	} {
		wg.Go(func() {
			if err := p.Do(t.Context(), "C1", c.prio, "", r.call(c.name, nil)); err != nil {
				t.Error(err)
			}
		})
		want[c.prio]++
		await(t, c.name+" queued", func() bool { n, _ := p.Queued("C1", c.prio); return n == want[c.prio] })
	}
	release()
	wg.Wait()
	if got, want := r.calls(), []string{"high", "normal-1", "normal-2", "edit"}; !slices.Equal(got, want) {
		t.Fatalf("order %q, want %q", got, want)
	}
}

// Queued edits of one message collapse into the latest; every caller gets
// its result. Edits of another message, and uncoalesced calls, stay.
func TestEditsCoalesce(t *testing.T) {
	p := pacer.New(time.Now, unpaced[string]())
	var wg sync.WaitGroup
	release := hold(t, p, "C1", &wg)
	var r recorder
	errLast := errors.New("last edit's result")
	errs := make([]error, 3)
	for i := range 3 {
		var res error
		if i == 2 {
			res = errLast
		}
		wg.Go(func() {
			errs[i] = p.Do(t.Context(), "C1", core.PriorityEdit, "msg-1", r.call(fmt.Sprint("msg-1 v", i), res))
		})
		await(t, "edit queued", func() bool { _, n := p.Queued("C1", core.PriorityEdit); return n == i+1 })
	}
	if calls, _ := p.Queued("C1", core.PriorityEdit); calls != 1 {
		t.Fatalf("%d queued calls for three edits of one message", calls)
	}
	wg.Go(func() { _ = p.Do(t.Context(), "C1", core.PriorityEdit, "msg-2", r.call("msg-2", nil)) })
	await(t, "other edit queued", func() bool { calls, _ := p.Queued("C1", core.PriorityEdit); return calls == 2 })
	release()
	wg.Wait()
	if got, want := r.calls(), []string{"msg-1 v2", "msg-2"}; !slices.Equal(got, want) {
		t.Fatalf("calls %q, want %q", got, want)
	}
	for i, err := range errs {
		if !errors.Is(err, errLast) {
			t.Errorf("caller %d got %v, want the latest edit's result", i, err)
		}
	}
}

// A refused call is retried after the wait the platform sent; a higher
// priority call queued meanwhile goes first.
func TestRateLimitRetriesAndHigherPriorityOvertakes(t *testing.T) {
	cfg := unpaced[int64]()
	var limitedKey atomic.Int64
	cfg.OnLimited = func(_ context.Context, k int64, _ time.Duration) { limitedKey.Store(k) }
	p := pacer.New(time.Now, cfg)
	var r recorder
	var tries atomic.Int32
	var wg sync.WaitGroup
	start := time.Now()
	err := p.Do(t.Context(), -100, core.PriorityNormal, "", func(ctx context.Context) error {
		if tries.Add(1) > 1 {
			return r.call("normal", nil)(ctx)
		}
		wg.Go(func() { _ = p.Do(t.Context(), -100, core.PriorityHigh, "", r.call("high", nil)) })
		await(t, "high queued", func() bool { n, _ := p.Queued(-100, core.PriorityHigh); return n == 1 })
		return errLimited{after: 100 * time.Millisecond}
	})
	wg.Wait()
	if err != nil {
		t.Fatalf("refused call not retried to success: %v", err)
	}
	if d := time.Since(start); d < 100*time.Millisecond {
		t.Fatalf("retry after %v, before the 100ms the platform asked for", d)
	}
	if got, want := r.calls(), []string{"high", "normal"}; !slices.Equal(got, want) {
		t.Fatalf("order %q, want %q", got, want)
	}
	if n := p.RateLimited(); n != 1 {
		t.Fatalf("RateLimited = %d, want 1", n)
	}
	if k := limitedKey.Load(); k != -100 {
		t.Fatalf("OnLimited told of key %d", k)
	}
}

// A caller that gives up before its call starts takes the call out of the
// queue: it is never sent.
func TestCancelledCallerIsDropped(t *testing.T) {
	p := pacer.New(time.Now, unpaced[string]())
	var wg sync.WaitGroup
	release := hold(t, p, "C1", &wg)
	var r recorder
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- p.Do(ctx, "C1", core.PriorityNormal, "", r.call("dropped", nil)) }()
	await(t, "call queued", func() bool { n, _ := p.Queued("C1", core.PriorityNormal); return n == 1 })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Do = %v", err)
	}
	if n, _ := p.Queued("C1", core.PriorityNormal); n != 0 {
		t.Fatalf("cancelled call still queued (%d waiting)", n)
	}
	release()
	if err := p.Do(t.Context(), "C1", core.PriorityNormal, "", r.call("after", nil)); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if got := r.calls(); !slices.Equal(got, []string{"after"}) {
		t.Fatalf("calls %q: the cancelled call was sent", got)
	}
	if err := p.Do(ctx, "C1", core.PriorityNormal, "", r.call("late", nil)); !errors.Is(err, context.Canceled) {
		t.Fatalf("Do on a done context = %v", err)
	}
}

// Lower bounds only: the pacer must not send faster than it was told. The
// calls queue up behind a held one, as concurrent posts to a channel do.
func TestSpacing(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cfg   pacer.Config[string]
		keys  []string
		block time.Duration
		min   time.Duration
	}{
		// hold takes one of the two tokens, the first call the other.
		{"token bucket", pacer.Config[string]{Rate: func(string) (time.Duration, int) { return 40 * time.Millisecond, 2 }, RetryAfter: retryAfter},
			[]string{"C1", "C1", "C1", "C1", "C1"}, 0, 4 * 40 * time.Millisecond},
		{"per key", pacer.Config[string]{Rate: func(k string) (time.Duration, int) {
			if k == "C1" {
				return 60 * time.Millisecond, 1
			}
			return 0, 1
		}, RetryAfter: retryAfter}, []string{"C1", "C1", "C1"}, 0, 3 * 60 * time.Millisecond},
		// hold's call takes the first of the two global slots a second.
		{"global", pacer.Config[string]{Rate: func(string) (time.Duration, int) { return 0, 1 }, RetryAfter: retryAfter, GlobalPerSecond: 2},
			[]string{"a", "b", "c", "d", "e"}, 0, 2 * time.Second},
		{"block all", unpaced[string](), []string{"a", "b"}, 150 * time.Millisecond, 150 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := pacer.New(time.Now, tc.cfg)
			start := time.Now()
			var wg sync.WaitGroup
			release := hold(t, p, "C1", &wg)
			if tc.block > 0 {
				p.BlockAll(tc.block)
			}
			var r recorder
			for i, k := range tc.keys {
				wg.Go(func() {
					if err := p.Do(t.Context(), k, core.PriorityNormal, "", r.call(fmt.Sprint(i), nil)); err != nil {
						t.Error(err)
					}
				})
			}
			want := 0
			for _, k := range tc.keys {
				if k == "C1" {
					want++
				}
			}
			await(t, "calls queued", func() bool { n, _ := p.Queued("C1", core.PriorityNormal); return n == want })
			release()
			wg.Wait()
			if d := time.Since(start); d < tc.min {
				t.Fatalf("%d calls done in %v, want at least %v", len(tc.keys), d, tc.min)
			}
			if n := len(r.calls()); n != len(tc.keys) {
				t.Fatalf("%d calls sent, want %d", n, len(tc.keys))
			}
		})
	}
}

// TestStatsCountsQueuedCallsAndRefusals: Stats sees calls waiting across
// keys, and refusals both while a queue lives and after it was dropped.
func TestStatsCountsQueuedCallsAndRefusals(t *testing.T) {
	p := pacer.New(time.Now, unpaced[string]())
	var wg sync.WaitGroup
	releaseA := hold(t, p, "a", &wg)
	releaseB := hold(t, p, "b", &wg)
	for _, k := range []string{"a", "a", "b"} {
		wg.Go(func() { _ = p.Do(t.Context(), k, core.PriorityNormal, "", func(context.Context) error { return nil }) })
	}
	await(t, "five calls queued", func() bool { return p.Stats().Queued == 5 })
	releaseA()
	releaseB()
	wg.Wait()
	if s := p.Stats(); s.Queued != 0 || s.RateLimited != 0 {
		t.Fatalf("after the calls: %+v, want nothing queued or refused", s)
	}
	var tries atomic.Int32
	if err := p.Do(t.Context(), "c", core.PriorityNormal, "", func(context.Context) error {
		if tries.Add(1) == 1 {
			return errLimited{after: time.Millisecond}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	await(t, "the refusal counted", func() bool { return p.Stats().RateLimited == 1 })
}

// TestCallsOneAtATimeAreSpaced: calls that arrive one after another, each
// after the last one finished, are spaced like a burst is. A queue dropped
// as soon as it emptied came back with a full bucket, so such calls (a
// run's posts and edits, a stream's pieces) were never spaced at all.
func TestCallsOneAtATimeAreSpaced(t *testing.T) {
	for _, tc := range []struct {
		name  string
		iv    time.Duration
		burst int
		calls int
		min   time.Duration
	}{
		{"burst 1", 50 * time.Millisecond, 1, 4, 3 * 50 * time.Millisecond},
		{"burst 2", 50 * time.Millisecond, 2, 5, 3 * 50 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := pacer.New(time.Now, pacer.Config[string]{Rate: func(string) (time.Duration, int) { return tc.iv, tc.burst }, RetryAfter: retryAfter})
			var r recorder
			start := time.Now()
			for i := range tc.calls {
				if err := p.Do(t.Context(), "C1", core.PriorityNormal, "", r.call(fmt.Sprint(i), nil)); err != nil {
					t.Fatal(err)
				}
			}
			if d := time.Since(start); d < tc.min {
				t.Fatalf("%d calls one at a time done in %v, want at least %v", tc.calls, d, tc.min)
			}
			if n := len(r.calls()); n != tc.calls {
				t.Fatalf("%d calls sent, want %d", n, tc.calls)
			}
		})
	}
}

// TestGlobalLimitIsPerSecond: GlobalPerSecond calls go at once, and no
// second ever holds more than GlobalPerSecond call starts, across keys.
func TestGlobalLimitIsPerSecond(t *testing.T) {
	const perSecond, calls = 4, 10
	p := pacer.New(time.Now, pacer.Config[string]{Rate: func(string) (time.Duration, int) { return 0, 1 }, RetryAfter: retryAfter, GlobalPerSecond: perSecond})
	var mu sync.Mutex
	var starts []time.Time
	begin := time.Now()
	var wg sync.WaitGroup
	for i := range calls {
		wg.Go(func() {
			_ = p.Do(t.Context(), fmt.Sprint("k", i), core.PriorityNormal, "", func(context.Context) error {
				mu.Lock()
				starts = append(starts, time.Now())
				mu.Unlock()
				return nil
			})
		})
	}
	wg.Wait()
	slices.SortFunc(starts, func(a, b time.Time) int { return a.Compare(b) })
	if d := starts[perSecond-1].Sub(begin); d > 500*time.Millisecond {
		t.Errorf("the first %d calls took %v: they should not wait", perSecond, d)
	}
	for i := perSecond; i < len(starts); i++ {
		if d := starts[i].Sub(starts[i-perSecond]); d < time.Second-10*time.Millisecond {
			t.Errorf("calls %d and %d started %v apart: %d calls within a second", i-perSecond, i, d, perSecond+1)
		}
	}
}
