package telegram

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
)

// attempts is a core.PostAttempts kept in memory, standing in for the
// engine's journal: made holds what an earlier process recorded; each
// Record notes how many sends the fake had seen when it was called.
type attempts struct {
	mu       sync.Mutex
	made     map[string]bool
	recorded []string
	sentThen []int
	sent     func() int
	fail     error
}

func (a *attempts) Made(_ context.Context, key string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.made[key]
}

func (a *attempts) Record(_ context.Context, key string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.fail != nil {
		return a.fail
	}
	a.recorded = append(a.recorded, key)
	a.sentThen = append(a.sentThen, a.sent())
	return nil
}

// A resumed post is marked exactly where an earlier attempt was recorded:
// of a three-part answer whose first part an earlier process attempted,
// only that part carries the marker; a resumed post with no attempt on
// record is sent plain. Each part's attempt is recorded before its send.
// (Before core.AttemptedPoster every part of a resumed post was marked.)
func TestResumedPostMarkedOnlyWhereAttempted(t *testing.T) {
	f := newFake(t)
	a, _ := newAdapter(t, testConfig(f, ModePolling))
	ctx := t.Context()
	att := &attempts{made: map[string]bool{"fxk1": true}, sent: func() int { return len(f.Sent()) }}

	long := strings.Repeat("word ", 2000) // three parts of at most 4,096
	if _, err := a.PostAttempted(ctx, core.Outbound{Key: "fxk1", Scope: scope("-1001", ""), Text: long, Resumed: true}, att); err != nil {
		t.Fatal(err)
	}
	sent := f.Sent()
	if len(sent) != 3 {
		t.Fatalf("%d parts sent, want 3", len(sent))
	}
	for i, s := range sent {
		if got, want := strings.Contains(s.Text, ResentMarker), i == 0; got != want {
			t.Errorf("part %d marked=%v, want %v (only part 0 was attempted before)", i, got, want)
		}
	}
	if want := []string{"fxk1", "fxk1#1", "fxk1#2"}; strings.Join(att.recorded, ",") != strings.Join(want, ",") {
		t.Errorf("attempts recorded %q, want %q", att.recorded, want)
	}
	for i, n := range att.sentThen {
		if n != i {
			t.Errorf("attempt %d recorded after %d sends, want before its own (%d)", i, n, i)
		}
	}

	if _, err := a.PostAttempted(ctx, core.Outbound{Key: "fxk2", Scope: scope("-1001", ""), Text: "never sent before", Resumed: true}, att); err != nil {
		t.Fatal(err)
	}
	if last := f.Sent()[len(f.Sent())-1]; last.Text != "never sent before" {
		t.Errorf("a resumed post never attempted was sent as %q, want it plain", last.Text)
	}
	// Post (no record of attempts) stays conservative.
	if _, err := a.Post(ctx, core.Outbound{Key: "fxk3", Scope: scope("-1001", ""), Text: "unknown", Resumed: true}); err != nil {
		t.Fatal(err)
	}
	if last := f.Sent()[len(f.Sent())-1]; !strings.Contains(last.Text, ResentMarker) {
		t.Errorf("Post of a resumed key without attempts sent %q, want the marker", last.Text)
	}
}

// An attempt that cannot be recorded is not made: nothing is sent, and the
// error says so.
func TestUnrecordedAttemptIsNotSent(t *testing.T) {
	f := newFake(t)
	a, _ := newAdapter(t, testConfig(f, ModePolling))
	boom := errors.New("journal unavailable")
	att := &attempts{made: map[string]bool{}, sent: func() int { return len(f.Sent()) }, fail: boom}
	_, err := a.PostAttempted(t.Context(), core.Outbound{Key: "fxk4", Scope: scope("-1001", ""), Text: "hello"}, att)
	if !errors.Is(err, boom) {
		t.Fatalf("err %v, want the record's failure", err)
	}
	if n := len(f.Sent()); n != 0 {
		t.Fatalf("%d messages sent without a recorded attempt", n)
	}
}

// A post still waiting for its turn in the chat's paced queue has not been
// attempted: when its caller goes away (the process dies) nothing is on
// record and nothing was sent, so the resumed post will go out plain. The
// attempt is recorded only in the queue's slot, just before sendMessage.
// Here flood control holds the chat's queue for an hour: the refused post
// was attempted (Telegram saw it), the one queued behind it was not.
func TestQueuedPostIsNotYetAttempted(t *testing.T) {
	f := newFake(t)
	f.RateLimit("sendMessage", 1, time.Hour)
	a, _ := newAdapter(t, testConfig(f, ModePolling))
	att := &attempts{made: map[string]bool{}, sent: func() int { return len(f.Sent()) }}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 2)
	post := func(key string) {
		_, err := a.PostAttempted(ctx, core.Outbound{Key: key, Scope: scope("-1001", ""), Text: key, Priority: core.PriorityNormal}, att)
		done <- err
	}
	go post("fxq1")
	queued := func(n int) {
		t.Helper()
		deadline := time.Now().Add(wait)
		for {
			calls, _ := a.pacer.q.Queued(-1001, core.PriorityNormal)
			if calls == n && a.pacer.q.RateLimited() >= 1 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("never %d queued behind flood control", n)
			}
			time.Sleep(time.Millisecond)
		}
	}
	queued(1)
	go post("fxq2")
	queued(2)
	cancel() // the process dies while both wait
	for range 2 {
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("err %v, want the caller's cancellation", err)
		}
	}
	att.mu.Lock()
	defer att.mu.Unlock()
	if strings.Join(att.recorded, ",") != "fxq1" {
		t.Fatalf("attempts recorded %q, want only the refused post's", att.recorded)
	}
	if n := len(f.Sent()); n != 0 {
		t.Fatalf("%d sent, want none", n)
	}
}
