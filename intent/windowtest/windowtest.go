// Package windowtest is the conformance suite every intent.WindowStore
// passes: the in-process store (run from package intent) and Redis (run
// from store/redis).
package windowtest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/intent"
)

// Run runs the suite. newStore returns an empty store that reads the real
// clock (time.Now); it is called once per subtest.
func Run(t *testing.T, newStore func(t *testing.T) intent.WindowStore) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s intent.WindowStore)
	}{
		{"Empty", testEmpty},
		{"ThreadRoundTrip", testThreadRoundTrip},
		{"ThreadNeverShortens", testThreadNeverShortens},
		{"ThreadPastIsNoop", testThreadPastIsNoop},
		{"ToplevelMoves", testToplevelMoves},
		{"ToplevelOlderAnswerLoses", testToplevelOlderAnswerLoses},
		{"ToplevelClosedByNewerAnswer", testToplevelClosedByNewerAnswer},
		{"Isolation", testIsolation},
		{"Expiry", testExpiry},
		{"Concurrent", testConcurrent},
		{"Cancelled", testCancelled},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.fn(t, newStore(t))
		})
	}
}

const (
	ch  core.ChannelKey = "slack/T1/C1"
	ch2 core.ChannelKey = "slack/T1/C2"
)

// ms is now (or now + d) truncated to what every store keeps.
func ms(d time.Duration) time.Time { return time.Now().Add(d).Truncate(time.Millisecond) }

func windows(t *testing.T, s intent.WindowStore, c core.ChannelKey, thread string) intent.Windows {
	t.Helper()
	w, err := s.Windows(context.Background(), c, thread)
	if err != nil {
		t.Fatalf("Windows(%s, %q): %v", c, thread, err)
	}
	return w
}

func extend(t *testing.T, s intent.WindowStore, c core.ChannelKey, thread string, until time.Time) {
	t.Helper()
	if err := s.ExtendThread(context.Background(), c, thread, until); err != nil {
		t.Fatalf("ExtendThread(%s, %q): %v", c, thread, err)
	}
}

func setTop(t *testing.T, s intent.WindowStore, c core.ChannelKey, w intent.Toplevel) {
	t.Helper()
	if err := s.SetToplevel(context.Background(), c, w); err != nil {
		t.Fatalf("SetToplevel(%s, %+v): %v", c, w, err)
	}
}

func wantThread(t *testing.T, got intent.Windows, want time.Time) {
	t.Helper()
	if !got.ThreadUntil.Equal(want) {
		t.Fatalf("thread until = %v, want %v", got.ThreadUntil, want)
	}
}

func wantTop(t *testing.T, got intent.Windows, want intent.Toplevel) {
	t.Helper()
	g := got.Toplevel
	if g.Person != want.Person || !g.At.Equal(want.At) || !g.Until.Equal(want.Until) {
		t.Fatalf("top-level = {%q at %v until %v}, want {%q at %v until %v}", g.Person, g.At, g.Until, want.Person, want.At, want.Until)
	}
}

func testEmpty(t *testing.T, s intent.WindowStore) {
	wantThread(t, windows(t, s, ch, "th"), time.Time{})
	wantTop(t, windows(t, s, ch, "th"), intent.Toplevel{})
	wantTop(t, windows(t, s, ch, ""), intent.Toplevel{})
}

func testThreadRoundTrip(t *testing.T, s intent.WindowStore) {
	until := ms(20 * time.Minute)
	extend(t, s, ch, "th", until)
	w := windows(t, s, ch, "th")
	wantThread(t, w, until)
	if !w.ThreadOpen(time.Now()) {
		t.Fatal("thread window not open right after ExtendThread")
	}
	wantTop(t, w, intent.Toplevel{})
	// A top-level read carries no thread window.
	wantThread(t, windows(t, s, ch, ""), time.Time{})
}

func testThreadNeverShortens(t *testing.T, s intent.WindowStore) {
	long, short, longer := ms(10*time.Minute), ms(5*time.Minute), ms(15*time.Minute)
	extend(t, s, ch, "th", long)
	extend(t, s, ch, "th", short)
	wantThread(t, windows(t, s, ch, "th"), long)
	extend(t, s, ch, "th", longer)
	wantThread(t, windows(t, s, ch, "th"), longer)
	extend(t, s, ch, "th", long)
	wantThread(t, windows(t, s, ch, "th"), longer)
}

func testThreadPastIsNoop(t *testing.T, s intent.WindowStore) {
	extend(t, s, ch, "th", ms(-time.Second))
	wantThread(t, windows(t, s, ch, "th"), time.Time{})
	// And a past until does not shorten an open window either.
	until := ms(time.Minute)
	extend(t, s, ch, "th", until)
	extend(t, s, ch, "th", ms(-time.Second))
	wantThread(t, windows(t, s, ch, "th"), until)
}

func testToplevelMoves(t *testing.T, s intent.WindowStore) {
	p1 := intent.Toplevel{Person: "U1", At: ms(0), Until: ms(6 * time.Minute)}
	setTop(t, s, ch, p1)
	wantTop(t, windows(t, s, ch, ""), p1)
	// Visible from any thread read of the channel.
	wantTop(t, windows(t, s, ch, "th"), p1)
	// Answering someone else moves the window.
	p2 := intent.Toplevel{Person: "U2", At: p1.At.Add(time.Second), Until: p1.Until.Add(time.Second)}
	setTop(t, s, ch, p2)
	wantTop(t, windows(t, s, ch, ""), p2)
	// Answering the same person again renews it.
	p2b := intent.Toplevel{Person: "U2", At: p2.At.Add(time.Second), Until: p2.Until.Add(time.Second)}
	setTop(t, s, ch, p2b)
	wantTop(t, windows(t, s, ch, ""), p2b)
	// One window per channel: another channel is untouched.
	wantTop(t, windows(t, s, ch2, ""), intent.Toplevel{})
}

func testToplevelOlderAnswerLoses(t *testing.T, s intent.WindowStore) {
	newer := intent.Toplevel{Person: "U2", At: ms(0), Until: ms(6 * time.Minute)}
	older := intent.Toplevel{Person: "U1", At: newer.At.Add(-time.Second), Until: newer.Until.Add(time.Minute)}
	setTop(t, s, ch, newer)
	setTop(t, s, ch, older) // arrives late: must not displace the newer answer
	wantTop(t, windows(t, s, ch, ""), newer)
	// Equal answer times: the later call wins.
	same := intent.Toplevel{Person: "U3", At: newer.At, Until: newer.Until}
	setTop(t, s, ch, same)
	wantTop(t, windows(t, s, ch, ""), same)
}

func testToplevelClosedByNewerAnswer(t *testing.T, s intent.WindowStore) {
	open := intent.Toplevel{Person: "U1", At: ms(-time.Minute), Until: ms(5 * time.Minute)}
	setTop(t, s, ch, open)
	closed := intent.Toplevel{Person: "U2", At: open.At.Add(time.Second), Until: ms(-time.Second)}
	setTop(t, s, ch, closed)
	if w := windows(t, s, ch, ""); w.Toplevel.Open("U1", time.Now()) || w.Toplevel.Open("U2", time.Now()) {
		t.Fatalf("top-level window still open after a newer, closed answer: %+v", w.Toplevel)
	}
	// A closed window on an empty channel stores nothing.
	setTop(t, s, ch2, closed)
	wantTop(t, windows(t, s, ch2, ""), intent.Toplevel{})
}

func testIsolation(t *testing.T, s intent.WindowStore) {
	// Pairs that a naive key scheme would collide.
	type loc struct {
		ch     core.ChannelKey
		thread string
	}
	locs := []loc{
		{"a/b/c", "d"},
		{"a/b/c}:t:d", "x"},
		{"a/b/c", "d}:t:x"},
		{"a/b/c:t", "d"},
		{"a/b/c", "t:d"},
		{"a/b/{c}", "top"},
		{"a/b/c", "top"},
		{"a/b/c", "1741.0001"},
		{"a/b/ünï", "🧵"},
	}
	base := ms(0)
	until := func(i int) time.Time { return base.Add(time.Duration(i+1) * time.Minute) }
	for i, l := range locs {
		extend(t, s, l.ch, l.thread, until(i))
	}
	for i, l := range locs {
		wantThread(t, windows(t, s, l.ch, l.thread), until(i))
		wantTop(t, windows(t, s, l.ch, l.thread), intent.Toplevel{})
	}
	top := intent.Toplevel{Person: "U:with:colons", At: base, Until: base.Add(time.Minute)}
	setTop(t, s, "a/b/c", top)
	wantTop(t, windows(t, s, "a/b/c", ""), top)
	wantThread(t, windows(t, s, "a/b/c", "d"), until(0))
	for _, l := range locs[1:] {
		if l.ch != "a/b/c" {
			wantTop(t, windows(t, s, l.ch, ""), intent.Toplevel{})
		}
	}
}

func testExpiry(t *testing.T, s intent.WindowStore) {
	const life = 300 * time.Millisecond
	until := ms(life)
	extend(t, s, ch, "th", until)
	top := intent.Toplevel{Person: "U1", At: ms(0), Until: until}
	setTop(t, s, ch, top)
	w := windows(t, s, ch, "th")
	wantThread(t, w, until)
	wantTop(t, w, top)
	time.Sleep(time.Until(until) + 200*time.Millisecond)
	w = windows(t, s, ch, "th")
	if !w.ThreadUntil.IsZero() || w.Toplevel != (intent.Toplevel{}) {
		t.Fatalf("expired windows still stored: %+v", w)
	}
	// An expired window can be opened afresh.
	again := ms(time.Minute)
	extend(t, s, ch, "th", again)
	wantThread(t, windows(t, s, ch, "th"), again)
}

func testConcurrent(t *testing.T, s intent.WindowStore) {
	const workers, each = 16, 25
	base := ms(10 * time.Minute)
	var wg sync.WaitGroup
	errs := make(chan error, workers*each*2)
	for g := range workers {
		wg.Go(func() {
			ctx := context.Background()
			for i := range each {
				// Every worker writes a distinct offset; the max must win.
				off := time.Duration((i*workers+g)%(workers*each)) * time.Millisecond
				if err := s.ExtendThread(ctx, ch, "th", base.Add(off)); err != nil {
					errs <- err
				}
				at := base.Add(-time.Minute).Add(off)
				if err := s.SetToplevel(ctx, ch, intent.Toplevel{Person: fmt.Sprintf("U%d", (i*workers+g)%(workers*each)), At: at, Until: at.Add(6 * time.Minute)}); err != nil {
					errs <- err
				}
				if _, err := s.Windows(ctx, ch, "th"); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	maxOff := time.Duration(workers*each-1) * time.Millisecond
	w := windows(t, s, ch, "th")
	wantThread(t, w, base.Add(maxOff))
	at := base.Add(-time.Minute).Add(maxOff)
	wantTop(t, w, intent.Toplevel{Person: fmt.Sprintf("U%d", workers*each-1), At: at, Until: at.Add(6 * time.Minute)})
}

func testCancelled(t *testing.T, s intent.WindowStore) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Windows(ctx, ch, "th"); err == nil {
		t.Error("Windows with a cancelled context: no error")
	}
	if err := s.ExtendThread(ctx, ch, "th", ms(time.Minute)); err == nil {
		t.Error("ExtendThread with a cancelled context: no error")
	}
	if err := s.SetToplevel(ctx, ch, intent.Toplevel{Person: "U1", At: ms(0), Until: ms(time.Minute)}); err == nil {
		t.Error("SetToplevel with a cancelled context: no error")
	}
	wantThread(t, windows(t, s, ch, "th"), time.Time{})
}
