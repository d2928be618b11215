package intent

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
)

// countingStore wraps a store and counts reads; fail makes every call fail.
type countingStore struct {
	WindowStore
	reads atomic.Int64
	fail  error
}

func (c *countingStore) Windows(ctx context.Context, ch core.ChannelKey, thread string) (Windows, error) {
	c.reads.Add(1)
	if c.fail != nil {
		return Windows{}, c.fail
	}
	return c.WindowStore.Windows(ctx, ch, thread)
}

func (c *countingStore) ExtendThread(ctx context.Context, ch core.ChannelKey, thread string, until time.Time) error {
	if c.fail != nil {
		return c.fail
	}
	return c.WindowStore.ExtendThread(ctx, ch, thread, until)
}

func (c *countingStore) SetToplevel(ctx context.Context, ch core.ChannelKey, w Toplevel) error {
	if c.fail != nil {
		return c.fail
	}
	return c.WindowStore.SetToplevel(ctx, ch, w)
}

func TestFilter(t *testing.T) {
	ctx := context.Background()
	now := t0
	clock := func() time.Time { return now }
	store := &countingStore{WindowStore: NewMemoryStore(clock)}
	f := NewFilter(store, clock)

	decide := func(e core.Event, want Reason) {
		t.Helper()
		d, err := f.Decide(ctx, e)
		if err != nil {
			t.Fatal(err)
		}
		if d.Reason != want || d.Route != want.Routes() {
			t.Fatalf("Decide(%s) = %v, want %s", e.MessageID, d, want)
		}
	}

	// Rules 1-5 decide without reading the store.
	decide(ev(byBot), ReasonNotAPersonMessage)
	decide(ev(dm), ReasonDM)
	decide(ev(mentionsBot), ReasonMention)
	decide(ev(replyToBot), ReasonReplyToBot)
	decide(ev(mentions(here)), ReasonAddressedToOthers)
	decide(ev(private), ReasonPrivateNoWindow)
	if n := store.reads.Load(); n != 0 {
		t.Fatalf("%d store reads for window-independent decisions", n)
	}

	// The bot answers U1's top-level message in a thread under it.
	if err := f.Posted(ctx, Post{Channel: c1, Thread: "root", MessageID: "b1", Answering: "root", AnsweringUser: "U1", AnsweringTop: true}, core.Policy{}); err != nil {
		t.Fatal(err)
	}
	now = t0.Add(time.Minute)
	decide(ev(inThread, author("U5")), ReasonThreadWindow)
	decide(ev(), ReasonToplevelWindow)
	decide(ev(author("U2")), ReasonNoWindow)
	if n := store.reads.Load(); n != 3 {
		t.Fatalf("%d store reads for 3 window decisions", n)
	}
	now = t0.Add(20 * time.Minute)
	decide(ev(inThread), ReasonNoWindow)

	c := f.Counts()
	want := map[Reason]uint64{
		ReasonNotAPersonMessage: 1, ReasonDM: 1, ReasonMention: 1, ReasonReplyToBot: 1,
		ReasonAddressedToOthers: 1, ReasonPrivateNoWindow: 1, ReasonThreadWindow: 1,
		ReasonToplevelWindow: 1, ReasonNoWindow: 2,
	}
	for r, n := range c.All() {
		if n != want[r] {
			t.Errorf("count[%s] = %d, want %d", r, n, want[r])
		}
	}
	if c.Routed() != 5 || c.Ignored() != 5 || c.StoreErrors != 0 {
		t.Errorf("routed %d ignored %d store errors %d", c.Routed(), c.Ignored(), c.StoreErrors)
	}
	if c.Get(Reason(0)) != 0 || c.Get(Reason(99)) != 0 {
		t.Error("Get of an invalid reason is not 0")
	}
}

// TestFilterStoreFailureFailsClosed: no windows, no route, and nothing of
// the message in the log.
func TestFilterStoreFailureFailsClosed(t *testing.T) {
	var logs bytes.Buffer
	store := &countingStore{WindowStore: NewMemoryStore(nil), fail: errors.New("connection refused")}
	f := NewFilter(store, nil, WithLogger(slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	secret := ev(inThread, author("U-SECRET-AUTHOR"), func(e *core.Event) {
		e.Text, e.MessageID = "the SECRET text nobody addressed to the bot", "M-SECRET-ID"
	})
	d, err := f.Decide(context.Background(), secret)
	if err == nil || !strings.Contains(err.Error(), "slack/T1/C1") || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("error = %v, want it wrapped with the channel", err)
	}
	if d.Route || d.Reason != ReasonNoWindow {
		t.Fatalf("decision on store failure = %v, want ignore(no-window)", d)
	}
	if f.Counts().StoreErrors != 1 {
		t.Fatalf("store errors = %d", f.Counts().StoreErrors)
	}
	out := logs.String()
	if !strings.Contains(out, "slack/T1/C1") {
		t.Fatalf("store failure not logged: %q", out)
	}
	for _, leak := range []string{"SECRET", secret.Text} {
		if strings.Contains(out, leak) || strings.Contains(err.Error(), leak) {
			t.Fatalf("message content %q leaked: log %q, error %q", leak, out, err)
		}
	}
	if err := f.Posted(context.Background(), Post{Channel: c1, Thread: "th", MessageID: "b1", At: time.Now()}, core.Policy{}); err == nil || !strings.Contains(err.Error(), "b1") {
		t.Fatalf("Posted error = %v", err)
	}
}

// TestFilterNeverLogsIgnoredMessages: a filter with a debug logger logs
// nothing for ordinary decisions.
func TestFilterNeverLogsIgnoredMessages(t *testing.T) {
	var logs bytes.Buffer
	f := NewFilter(NewMemoryStore(nil), nil, WithLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	for _, e := range []core.Event{ev(), ev(inThread), ev(byBot), ev(mentions(here)), ev(private), ev(mentionsBot)} {
		e.Text = "private words"
		if _, err := f.Decide(context.Background(), e); err != nil {
			t.Fatal(err)
		}
	}
	if logs.Len() != 0 {
		t.Fatalf("filter logged: %q", logs.String())
	}
}

func TestFilterPostedDefaultsToNow(t *testing.T) {
	now := t0
	s := NewMemoryStore(func() time.Time { return now })
	f := NewFilter(s, func() time.Time { return now })
	if err := f.Posted(context.Background(), Post{Channel: c1, Thread: "th", MessageID: "b1"}, core.Policy{ThreadWindowS: 30}); err != nil {
		t.Fatal(err)
	}
	w, _ := s.Windows(context.Background(), c1, "th")
	if !w.ThreadUntil.Equal(t0.Add(30 * time.Second)) {
		t.Fatalf("thread until = %v", w.ThreadUntil)
	}
}

// ObservePost is Posted for the engine's view of a post: the same windows.
func TestFilterObservePost(t *testing.T) {
	now := t0
	s := NewMemoryStore(func() time.Time { return now })
	f := NewFilter(s, func() time.Time { return now })
	scope := core.Scope{Platform: "slack", Workspace: "T1", Channel: "C1", Thread: "root"}
	err := f.ObservePost(context.Background(), core.PostedMessage{
		Scope: scope, MessageID: "b1", At: t0,
		Answering: "root", AnsweringUser: "U1", AnsweringTop: true,
		Policy: core.Policy{ThreadWindowS: 30, ToplevelWindowS: 10},
	})
	if err != nil {
		t.Fatal(err)
	}
	w, err := s.Windows(context.Background(), scope.Key(), "root")
	if err != nil {
		t.Fatal(err)
	}
	want := Toplevel{Person: "U1", At: t0, Until: t0.Add(10 * time.Second)}
	if !w.ThreadUntil.Equal(t0.Add(30*time.Second)) || w.Toplevel != want {
		t.Fatalf("windows = %+v", w)
	}
}

func TestFilterConcurrent(t *testing.T) {
	f := NewFilter(NewMemoryStore(nil), nil)
	ctx := context.Background()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				if i%10 == 0 {
					_ = f.Posted(ctx, Post{Channel: c1, Thread: "root", MessageID: "b", Answering: "root", AnsweringUser: "U1", AnsweringTop: true}, core.Policy{})
				}
				e := ev(inThread)
				if (g+i)%2 == 0 {
					e = ev(author("U2"))
				}
				if _, err := f.Decide(ctx, e); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	c := f.Counts()
	if total := c.Routed() + c.Ignored(); total != 8*200 {
		t.Fatalf("counted %d decisions, want %d", total, 8*200)
	}
}

func BenchmarkFilter(b *testing.B) {
	ctx := context.Background()
	f := NewFilter(NewMemoryStore(nil), nil)
	if err := f.Posted(ctx, Post{Channel: c1, Thread: "root", MessageID: "b1", Answering: "root", AnsweringUser: "U1", AnsweringTop: true}, core.Policy{}); err != nil {
		b.Fatal(err)
	}
	events := []core.Event{
		ev(inThread),          // route: thread window
		ev(),                  // route: top-level window
		ev(author("U2")),      // ignore: no window
		ev(byBot),             // ignore: no store read
		ev(mentions(here)),    // ignore: no store read
		ev(inThread, private), // ignore: no store read
		ev(func(e *core.Event) { e.Scope.Thread = "cold" }), // ignore: no window
		ev(mentionsBot), // route: mention
	}
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if _, err := f.Decide(ctx, events[i%len(events)]); err != nil {
				b.Fatal(err)
			}
			i++
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		start := time.Now()
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				if _, err := f.Decide(ctx, events[i%len(events)]); err != nil {
					b.Error(err)
					return
				}
				i++
			}
		})
		b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "decisions/s")
	})
}
