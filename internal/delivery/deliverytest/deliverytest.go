// Package deliverytest is the conformance suite of the delivery contract
// (internal/delivery): claim → deliver → commit or release, over any
// dedupe.Deduper. internal/delivery runs it against internal/dedupe.Memory
// (on pacertest's manual clock) and store/redis.Deduper (on the wall clock, whose
// leases lapse in real time).
package deliverytest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/internal/dedupe"
	"github.com/marlowe-bot/marlowe/internal/delivery"
	"github.com/marlowe-bot/marlowe/internal/pacer/pacertest"
)

// Harness is one Deduper under test and the time it lives on.
type Harness struct {
	// Deduper is fresh and empty; replicas share it.
	Deduper dedupe.Deduper
	// Clock is the manual clock Deduper's leases expire on, or nil when
	// they expire in real time (then the claimers use the wall clock).
	Clock *pacertest.Clock
}

// shortLease is a lease the suite lets lapse: on a manual clock it is
// advanced past, in real time it is awaited (Redis PX is fine-grained).
const shortLease = 300 * time.Millisecond

// Run checks the contract. newHarness returns a fresh harness per subtest.
func Run(t *testing.T, newHarness func(t *testing.T) Harness) {
	t.Run("ExactlyOnceAcrossTwoClaimers", func(t *testing.T) { exactlyOnce(t, newHarness(t)) })
	t.Run("ExactlyOnceUnderRace", func(t *testing.T) { exactlyOnceRace(t, newHarness(t)) })
	t.Run("CrashedClaimerLeaseLapses", func(t *testing.T) { crashedLease(t, newHarness(t)) })
	t.Run("FailedDeliveryReleasedAndRedelivered", func(t *testing.T) { failedReleased(t, newHarness(t)) })
	t.Run("FailedAttemptsRetried", func(t *testing.T) { retried(t, newHarness(t)) })
	t.Run("DoneKeyAcknowledgedWithoutDelivering", func(t *testing.T) { doneKey(t, newHarness(t)) })
	t.Run("ContextCancelledMidClaimLosesNothing", func(t *testing.T) { cancelledMidClaim(t, newHarness(t)) })
	t.Run("ContextEndedFirstHoldsNothing", func(t *testing.T) { endedFirst(t, newHarness(t)) })
	t.Run("LateSuccessStillCommits", func(t *testing.T) { lateSuccess(t, newHarness(t)) })
}

// claimer is one replica's Claimer on the harness.
func claimer(h Harness, d dedupe.Deduper, p delivery.Policy) *delivery.Claimer {
	if d == nil {
		d = h.Deduper
	}
	var opts []delivery.Option
	if h.Clock != nil {
		opts = append(opts, delivery.WithClock(h.Clock))
	}
	return delivery.New(d, p, opts...)
}

// drive advances a manual clock whenever a claimer waits on it, until the
// test ends. On the wall clock it does nothing: time passes by itself.
func drive(t *testing.T, h Harness) {
	if h.Clock == nil {
		return
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	t.Cleanup(func() { close(stop); wg.Wait() })
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-h.Clock.Waiting():
				for at, ok := h.Clock.NextTimer(); ok; at, ok = h.Clock.NextTimer() {
					h.Clock.AdvanceTo(at)
				}
			}
		}
	})
}

// spy reports each Claim that found the key in flight elsewhere.
type spy struct {
	dedupe.Deduper
	inFlight chan string
}

func newSpy(d dedupe.Deduper) *spy { return &spy{Deduper: d, inFlight: make(chan string, 64)} }

func (s *spy) Claim(ctx context.Context, key string, lease time.Duration) (string, bool, error) {
	tok, done, err := s.Deduper.Claim(ctx, key, lease)
	if err == nil && !done && tok == "" {
		select {
		case s.inFlight <- key:
		default:
		}
	}
	return tok, done, err
}

// testCtx bounds a subtest, so a claim left held (a broken implementation)
// fails it instead of waiting out an hour's lease.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	t.Cleanup(cancel)
	return ctx
}

type outcome struct {
	res delivery.Result
	err error
}

func await[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(20 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

// exactlyOnce: replica A holds the key in its delivery while B's copy
// arrives; B waits for A and acknowledges without delivering.
func exactlyOnce(t *testing.T, h Harness) {
	ctx := testCtx(t)
	p := delivery.Policy{Lease: time.Minute}
	sp := newSpy(h.Deduper)
	a, b := claimer(h, nil, p), claimer(h, sp, p)
	var calls atomic.Int32
	entered, gate := make(chan struct{}), make(chan struct{})
	aDone, bDone := make(chan outcome, 1), make(chan outcome, 1)
	go func() {
		r, err := a.Deliver(ctx, "k", func(context.Context) error {
			calls.Add(1)
			close(entered)
			<-gate
			return nil
		})
		aDone <- outcome{r, err}
	}()
	await(t, entered, "A's delivery")
	go func() {
		r, err := b.Deliver(ctx, "k", func(context.Context) error { calls.Add(1); return nil })
		bDone <- outcome{r, err}
	}()
	await(t, sp.inFlight, "B to see A's claim")
	close(gate)
	if o := await(t, aDone, "A"); o.err != nil || o.res != delivery.Delivered {
		t.Fatalf("A = %v, %v; want delivered", o.res, o.err)
	}
	drive(t, h)
	if o := await(t, bDone, "B"); o.err != nil || o.res != delivery.Duplicate {
		t.Fatalf("B = %v, %v; want a duplicate acknowledged", o.res, o.err)
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("delivered %d times, want 1", n)
	}
}

// exactlyOnceRace: two replicas get the same 40 keys at once.
func exactlyOnceRace(t *testing.T, h Harness) {
	drive(t, h)
	ctx := testCtx(t)
	p := delivery.Policy{Lease: time.Hour}
	a, b := claimer(h, nil, p), claimer(h, nil, p)
	const keys = 40
	var calls [keys]atomic.Int32
	var wg sync.WaitGroup
	for i := range keys {
		for _, c := range []*delivery.Claimer{a, b} {
			wg.Go(func() {
				if _, err := c.Deliver(ctx, fmt.Sprintf("race-%d", i), func(context.Context) error {
					calls[i].Add(1)
					return nil
				}); err != nil {
					t.Error(err)
				}
			})
		}
	}
	wg.Wait()
	for i := range keys {
		if n := calls[i].Load(); n != 1 {
			t.Errorf("key %d delivered %d times, want 1", i, n)
		}
	}
}

// crashedLease: a claimer took the key and died before settling it; once
// its lease lapses the redelivery is delivered, once.
func crashedLease(t *testing.T, h Harness) {
	ctx := testCtx(t)
	if tok, _, err := h.Deduper.Claim(ctx, "k", shortLease); err != nil || tok == "" {
		t.Fatalf("crashed claimer's claim: %q, %v", tok, err)
	}
	drive(t, h)
	c := claimer(h, nil, delivery.Policy{Lease: shortLease})
	var calls atomic.Int32
	res, err := c.Deliver(ctx, "k", func(context.Context) error { calls.Add(1); return nil })
	if err != nil || res != delivery.Delivered || calls.Load() != 1 {
		t.Fatalf("after the lease lapsed: %v, %v, %d calls; want delivered once", res, err, calls.Load())
	}
	res, err = c.Deliver(ctx, "k", func(context.Context) error { calls.Add(1); return nil })
	if err != nil || res != delivery.Duplicate || calls.Load() != 1 {
		t.Fatalf("again: %v, %v, %d calls; want a duplicate", res, err, calls.Load())
	}
}

// failedReleased: a failed delivery gives its claim back at once, so the
// platform's redelivery is delivered (not held for a lease).
func failedReleased(t *testing.T, h Harness) {
	ctx := testCtx(t)
	c := claimer(h, nil, delivery.Policy{Lease: time.Hour})
	boom := errors.New("engine down")
	if _, err := c.Deliver(ctx, "k", func(context.Context) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("failed delivery returned %v, want %v", err, boom)
	}
	var calls atomic.Int32
	res, err := c.Deliver(ctx, "k", func(context.Context) error { calls.Add(1); return nil })
	if err != nil || res != delivery.Delivered || calls.Load() != 1 {
		t.Fatalf("redelivery: %v, %v, %d calls; want delivered", res, err, calls.Load())
	}
}

// retried: with Attempts, a failing delivery is tried again (paused on the
// clock) and its key is not left claimed between tries.
func retried(t *testing.T, h Harness) {
	drive(t, h)
	ctx := testCtx(t)
	c := claimer(h, nil, delivery.Policy{Lease: time.Hour, Attempts: 3, Retry: 10 * time.Millisecond})
	var calls atomic.Int32
	res, err := c.Deliver(ctx, "k", func(context.Context) error {
		if calls.Add(1) < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	if err != nil || res != delivery.Delivered || calls.Load() != 3 {
		t.Fatalf("retried: %v, %v, %d calls; want delivered on the third", res, err, calls.Load())
	}
	calls.Store(0)
	_, err = c.Deliver(ctx, "k2", func(context.Context) error { calls.Add(1); return errors.New("never") })
	if err == nil || calls.Load() != 3 {
		t.Fatalf("always failing: %v after %d calls; want an error after 3", err, calls.Load())
	}
}

// doneKey: a key committed (here by another replica) is acknowledged
// without delivering.
func doneKey(t *testing.T, h Harness) {
	ctx := testCtx(t)
	tok, _, err := h.Deduper.Claim(ctx, "k", time.Minute)
	if err != nil || tok == "" {
		t.Fatal(tok, err)
	}
	if err := h.Deduper.Commit(ctx, "k", tok, time.Hour); err != nil {
		t.Fatal(err)
	}
	c := claimer(h, nil, delivery.Policy{})
	res, err := c.Deliver(ctx, "k", func(context.Context) error {
		t.Error("a done key was delivered")
		return nil
	})
	if err != nil || res != delivery.Duplicate {
		t.Fatalf("done key: %v, %v; want a duplicate acknowledged", res, err)
	}
}

// cancelledMidClaim: a delivery told to stop while another holds the key
// gives up without delivering and without a claim, and the holder failing
// afterwards leaves the key to the next redelivery: nothing lost.
func cancelledMidClaim(t *testing.T, h Harness) {
	ctx := testCtx(t)
	holder, _, err := h.Deduper.Claim(ctx, "k", time.Hour)
	if err != nil || holder == "" {
		t.Fatal(holder, err)
	}
	sp := newSpy(h.Deduper)
	b := claimer(h, sp, delivery.Policy{Lease: time.Hour})
	var calls atomic.Int32
	bctx, cancel := context.WithCancel(ctx)
	bDone := make(chan outcome, 1)
	go func() {
		r, err := b.Deliver(bctx, "k", func(context.Context) error { calls.Add(1); return nil })
		bDone <- outcome{r, err}
	}()
	await(t, sp.inFlight, "B to wait for the holder")
	cancel()
	if o := await(t, bDone, "B"); o.err == nil || !errors.Is(o.err, delivery.ErrInFlight) {
		t.Fatalf("cancelled claim = %v, %v; want ErrInFlight (not acknowledged)", o.res, o.err)
	}
	if err := h.Deduper.Release(ctx, "k", holder); err != nil { // the holder's delivery failed
		t.Fatal(err)
	}
	res, err := claimer(h, nil, delivery.Policy{}).Deliver(ctx, "k", func(context.Context) error { calls.Add(1); return nil })
	if err != nil || res != delivery.Delivered || calls.Load() != 1 {
		t.Fatalf("redelivery: %v, %v, %d calls; want delivered once in all", res, err, calls.Load())
	}
}

// endedFirst: a delivery whose context had ended (a receiver stopping) is
// not acknowledged, delivers nothing and leaves no claim behind, so the
// redelivery is delivered at once.
func endedFirst(t *testing.T, h Harness) {
	ctx, cancel := context.WithCancel(testCtx(t))
	cancel()
	c := claimer(h, nil, delivery.Policy{Lease: time.Hour})
	var calls atomic.Int32
	if _, err := c.Deliver(ctx, "k", func(context.Context) error { calls.Add(1); return nil }); err == nil {
		t.Fatal("a delivery with an ended context said it may be acknowledged")
	}
	res, err := c.Deliver(testCtx(t), "k", func(context.Context) error { calls.Add(1); return nil })
	if err != nil || res != delivery.Delivered || calls.Load() != 1 {
		t.Fatalf("redelivery: %v, %v, %d calls; want delivered once in all", res, err, calls.Load())
	}
}

// lateSuccess: the caller's context ends while fn runs, fn succeeds anyway
// (the engine journaled it): the commit is not cancelled with the caller,
// so the redelivery is a duplicate.
func lateSuccess(t *testing.T, h Harness) {
	ctx, cancel := context.WithCancel(testCtx(t))
	c := claimer(h, nil, delivery.Policy{})
	res, err := c.Deliver(ctx, "k", func(context.Context) error { cancel(); return nil })
	if err != nil || res != delivery.Delivered {
		t.Fatalf("late success: %v, %v", res, err)
	}
	res, err = c.Deliver(testCtx(t), "k", func(context.Context) error {
		t.Error("a committed key was delivered again")
		return nil
	})
	if err != nil || res != delivery.Duplicate {
		t.Fatalf("redelivery after a late success: %v, %v; want a duplicate", res, err)
	}
}
