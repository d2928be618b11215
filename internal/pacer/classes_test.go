package pacer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
)

type errRefused struct{ after time.Duration }

func (e errRefused) Error() string { return fmt.Sprintf("429, retry after %v", e.after) }

func refusal(err error) (time.Duration, bool) {
	var r errRefused
	if errors.As(err, &r) {
		return r.after, true
	}
	return 0, false
}

// telegramLike is Telegram's shape: per chat one message a second after a
// burst of 3, 20 a minute in a group, decorations on a budget of their
// own, 30 calls a second bot-wide.
func telegramLike(c *fakeClock) Config[int64] {
	return Config[int64]{
		Rate: func(int64) (time.Duration, int) { return time.Second, 3 },
		Window: func(chat int64) (int, time.Duration) {
			if chat < 0 {
				return 20, time.Minute
			}
			return 0, 0
		},
		Decoration:      func(int64) (time.Duration, int) { return time.Second, 3 },
		RetryAfter:      refusal,
		GlobalPerSecond: 30,
		After:           c.After,
	}
}

// sends records when (on the fake clock) each call was sent.
type sends struct {
	mu sync.Mutex
	c  *fakeClock
	at []time.Time
	by []string
}

func (s *sends) call(name string, err error) func(context.Context) error {
	return func(context.Context) error {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.at = append(s.at, s.c.Now())
		s.by = append(s.by, name)
		return err
	}
}

func (s *sends) n() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.at)
}

func (s *sends) names() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.by)
}

// The busy group's pattern: for each message a 👀 and typing, then the
// answer. Decorations never wait in the chat's queue nor take its budget,
// so the answer goes at once (the old pacer queued the 👀 with the
// answers: after three answers the chat's burst was spent and each later
// answer waited behind its own reaction). Over their budget, decorations
// are dropped, not delayed.
func TestAnswerNeverWaitsBehindDecorations(t *testing.T) {
	c := newFakeClock()
	p := New(c.Now, telegramLike(c))
	s := &sends{c: c}
	const chat = -1001
	ctx := t.Context()
	start := c.Now()
	dropped := 0
	for i := range 3 { // three answers in the same instant: the burst
		for _, deco := range []string{"👀", "typing"} {
			if err := p.Decorate(ctx, chat, s.call(fmt.Sprint(deco, i), nil)); errors.Is(err, ErrDropped) {
				dropped++
			} else if err != nil {
				t.Fatal(err)
			}
		}
		if err := p.Do(ctx, chat, core.PriorityHigh, "", s.call(fmt.Sprint("answer", i), nil)); err != nil {
			t.Fatal(err)
		}
	}
	if got := c.Now(); !got.Equal(start) {
		t.Fatalf("answers waited %v on the fake clock", got.Sub(start))
	}
	if dropped != 3 {
		t.Errorf("%d decorations dropped, want 3 (six against a burst of 3)", dropped)
	}
	want := []string{"👀0", "typing0", "answer0", "👀1", "answer1", "answer2"}
	if got := s.names(); !slices.Equal(got, want) {
		t.Errorf("sent %q, want %q", got, want)
	}
	if st := p.Stats(); st.Dropped != 3 {
		t.Errorf("Stats().Dropped = %d, want 3", st.Dropped)
	}
	settle(t, c, p)
}

// Checklist edits leave the chat's last call free: an answer that comes
// after a run of edits goes at once.
func TestEditsLeaveRoomForTheAnswer(t *testing.T) {
	c := newFakeClock()
	p := New(c.Now, telegramLike(c))
	s := &sends{c: c}
	const chat = 42
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Go(func() {
			_ = p.Do(t.Context(), chat, core.PriorityEdit, fmt.Sprint("msg", i), s.call(fmt.Sprint("edit", i), nil))
		})
	}
	runUntil(t, c, "two edits sent", func() bool { return s.n() == 2 })
	start := c.Now()
	if err := p.Do(t.Context(), chat, core.PriorityHigh, "", s.call("answer", nil)); err != nil {
		t.Fatal(err)
	}
	if waited := c.Now().Sub(start); waited != 0 {
		t.Fatalf("the answer waited %v behind edits", waited)
	}
	runUntil(t, c, "the last edit sent", func() bool { return s.n() == 4 })
	wg.Wait()
	if got := s.names(); got[2] != "answer" {
		t.Errorf("order %q: the answer should overtake the third edit", got)
	}
	settle(t, c, p)
}

// A burst of answers in a group never puts more than 20 in any minute,
// and never more than the chat's 1/s after its burst of 3 (the old bucket,
// burst 3 plus one per 3 s, let 23 through in the first minute).
func TestGroupNeverExceedsTwentyAMinute(t *testing.T) {
	c := newFakeClock()
	p := New(c.Now, telegramLike(c))
	s := &sends{c: c}
	const chat, answers = -1001, 45
	var wg sync.WaitGroup
	for i := range answers {
		wg.Go(func() {
			if err := p.Do(t.Context(), chat, core.PriorityHigh, "", s.call(fmt.Sprint(i), nil)); err != nil {
				t.Error(err)
			}
		})
	}
	runUntil(t, c, "every answer sent", func() bool { return s.n() == answers })
	wg.Wait()
	s.mu.Lock()
	at := slices.Clone(s.at)
	s.mu.Unlock()
	for i := range at {
		inMinute, inSecond := 0, 0
		for _, u := range at[i:] {
			if u.Sub(at[i]) < time.Minute {
				inMinute++
			}
			if u.Sub(at[i]) < time.Second {
				inSecond++
			}
		}
		if inMinute > 20 {
			t.Fatalf("%d sends in the minute from %v", inMinute, at[i].Sub(at[0]))
		}
		if inSecond > 3 {
			t.Fatalf("%d sends in the second from %v", inSecond, at[i].Sub(at[0]))
		}
	}
	settle(t, c, p)
}

// A refusal's retry_after is waited out on the injected clock before the
// same call goes again; meanwhile decorations of the chat are dropped
// after their own refusal, and the answer's queue is not held by it.
func TestRetryAfterHonoured(t *testing.T) {
	c := newFakeClock()
	p := New(c.Now, telegramLike(c))
	s := &sends{c: c}
	const chat = 7
	refused := true
	var mu sync.Mutex
	start := c.Now()
	done := make(chan error, 1)
	go func() {
		done <- p.Do(t.Context(), chat, core.PriorityHigh, "", func(ctx context.Context) error {
			mu.Lock()
			r := refused
			refused = false
			mu.Unlock()
			if r {
				return s.call("refused", errRefused{5 * time.Second})(ctx)
			}
			return s.call("answer", nil)(ctx)
		})
	}()
	runUntil(t, c, "the answer sent", func() bool { return s.n() == 2 })
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	gap := s.at[1].Sub(start)
	s.mu.Unlock()
	if gap < 5*time.Second {
		t.Fatalf("retried after %v, before retry_after (5s)", gap)
	}
	if p.RateLimited() != 1 {
		t.Errorf("RateLimited() = %d", p.RateLimited())
	}

	// A decoration refused holds only the chat's decorations.
	if err := p.Decorate(t.Context(), chat, s.call("👀", errRefused{30 * time.Second})); !errors.Is(err, ErrDropped) {
		t.Fatalf("refused decoration: %v, want ErrDropped", err)
	}
	if err := p.Decorate(t.Context(), chat, s.call("typing", nil)); !errors.Is(err, ErrDropped) {
		t.Fatalf("decoration within retry_after: %v, want ErrDropped", err)
	}
	before := c.Now()
	if err := p.Do(t.Context(), chat, core.PriorityHigh, "", s.call("answer2", nil)); err != nil {
		t.Fatal(err)
	}
	if c.Now() != before {
		t.Errorf("the answer waited for the decorations' retry_after")
	}
	c.Advance(31 * time.Second)
	if err := p.Decorate(t.Context(), chat, s.call("typing", nil)); err != nil {
		t.Fatalf("decoration after retry_after: %v", err)
	}
	settle(t, c, p)
}

// Waiting for a bot-wide slot is waiting in the queue: the caller can
// withdraw (its ctx ends) and a higher-priority call overtakes. The old
// pacer marked the call started and then slept for the slot on the wall
// clock.
func TestGlobalSlotWaitIsCancellableAndOvertaken(t *testing.T) {
	c := newFakeClock()
	cfg := Config[string]{
		Rate:       func(string) (time.Duration, int) { return 0, 1 },
		RetryAfter: refusal,
		Global:     NewGlobal(1),
		After:      c.After,
	}
	p := New(c.Now, cfg)
	s := &sends{c: c}
	if err := p.Do(t.Context(), "A", core.PriorityHigh, "", s.call("A", nil)); err != nil { // takes the second's slot
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	withdrawn := make(chan error, 1)
	go func() { withdrawn <- p.Do(ctx, "B", core.PriorityNormal, "", s.call("B withdrawn", nil)) }()
	await(t, "B queued", func() bool { n, _ := p.Queued("B", core.PriorityNormal); return n == 1 })
	edit := make(chan error, 1)
	go func() { edit <- p.Do(t.Context(), "B", core.PriorityEdit, "m", s.call("B edit", nil)) }()
	await(t, "B's edit queued", func() bool { n, _ := p.Queued("B", core.PriorityEdit); return n == 1 })
	cancel()
	if err := <-withdrawn; !errors.Is(err, context.Canceled) {
		t.Fatalf("withdrawn call: %v", err)
	}
	answer := make(chan error, 1)
	go func() { answer <- p.Do(t.Context(), "B", core.PriorityHigh, "", s.call("B answer", nil)) }()
	await(t, "B's answer queued", func() bool { n, _ := p.Queued("B", core.PriorityHigh); return n == 1 })
	runUntil(t, c, "B's calls sent", func() bool { return s.n() == 3 })
	if err := <-answer; err != nil {
		t.Fatal(err)
	}
	if err := <-edit; err != nil {
		t.Fatal(err)
	}
	if got, want := s.names(), []string{"A", "B answer", "B edit"}; !slices.Equal(got, want) {
		t.Fatalf("sent %q, want %q", got, want)
	}
	settle(t, c, p)
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
