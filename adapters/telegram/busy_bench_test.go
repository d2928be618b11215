package telegram

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/adapters/telegram/telegramfake"
	"github.com/marlowe-bot/marlowe/core"
)

// busyPeople speak in turn in the busy group.
var busyPeople = []telegramfake.User{alice, bob, {ID: 503, FirstName: "Carol", Username: "carol"}}

// busyAnswered says which of the busy group's messages Marlowe answers:
// 13 of every 24 (13 a minute at one message every 2.5 s).
func busyAnswered(i int) bool { return (i*13)/24 != ((i+1)*13)/24 }

// busyStats is what one run of the busy group measured, in the clock the
// pacer was given.
type busyStats struct {
	mu       sync.Mutex
	ready    []time.Duration            // answer: Post called → returned (pacing + HTTP)
	arrival  []time.Duration            // answer: message injected → answer posted
	byMethod map[string][]time.Duration // each call's time in the adapter
	lastCall time.Time
}

func (s *busyStats) add(method string, d time.Duration, end time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byMethod == nil {
		s.byMethod = map[string][]time.Duration{}
	}
	s.byMethod[method] = append(s.byMethod[method], d)
	if end.After(s.lastCall) {
		s.lastCall = end
	}
}

// await waits (wall time, bounded) until n answers are measured.
func (s *busyStats) await(n int) bool {
	deadline := time.Now().Add(wait)
	for time.Now().Before(deadline) {
		s.mu.Lock()
		got := len(s.arrival)
		s.mu.Unlock()
		if got >= n {
			return true
		}
		time.Sleep(time.Millisecond)
	}
	return false
}

func pct(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)]
}

// busyEngine answers like the engine does: a 👀 on the message, typing,
// then the answer as a reply (PriorityHigh) once the model is done.
func busyEngine(a *Adapter, now func() time.Time, think time.Duration, st *busyStats, injected func(id string) time.Time, wg *sync.WaitGroup) func(context.Context, core.Inbound) error {
	return func(_ context.Context, in core.Inbound) error {
		ev := in.Event
		if ev == nil || !ev.MentionsBot {
			return nil
		}
		wg.Go(func() {
			ctx := context.Background()
			timed := func(method string, f func() error) {
				t0 := now()
				if err := f(); err != nil {
					panic(fmt.Sprintf("%s: %v", method, err))
				}
				st.add(method, now().Sub(t0), now())
			}
			ref := core.MessageRef{Scope: ev.Scope, ID: ev.MessageID}
			timed("setMessageReaction", func() error { return a.React(ctx, ref, core.AckReaction) })
			timed("sendChatAction", func() error { return a.Typing(ctx, ev.Scope) })
			time.Sleep(think)
			t0 := now()
			sc := ev.Scope
			sc.Thread = ev.MessageID
			timed("sendMessage", func() error {
				_, err := a.Post(ctx, core.Outbound{Key: "ans-" + ev.MessageID, Scope: sc, Text: "answer to " + ev.MessageID, Priority: core.PriorityHigh})
				return err
			})
			st.mu.Lock()
			st.ready = append(st.ready, now().Sub(t0))
			st.arrival = append(st.arrival, now().Sub(injected(ev.MessageID)))
			st.mu.Unlock()
		})
		return nil
	}
}

// BenchmarkBusyTelegramGroup is the busy group at Telegram's own limits
// (WithPace defaults): one group, a message every 2.5 s from three people,
// 13 of every 24 answered (13 a minute), each answer costing a 👀, a typing
// action and the message. Wall clock: one iteration is a minute; run with
// -benchtime 1x. Reports the answer's wait from ready to posted (p50, p99,
// max), from the message's arrival, and the last API call after the last
// message.
func BenchmarkBusyTelegramGroup(b *testing.B) {
	for range b.N {
		busyGroup(b, 24, 2500*time.Millisecond)
	}
}

func busyGroup(b *testing.B, msgs int, every time.Duration) {
	f := newFake(b)
	a, _ := newAdapter(b, testConfig(f, ModePolling), WithPace(time.Second, 3, 20, 30))
	var st busyStats
	var mu sync.Mutex
	at := map[string]time.Time{}
	injected := func(id string) time.Time { mu.Lock(); defer mu.Unlock(); return at[id] }
	var wg sync.WaitGroup
	stop := run(b, a, busyEngine(a, time.Now, 20*time.Millisecond, &st, injected, &wg))
	var lastIn time.Time
	for i := range msgs {
		text := "chatter in the group"
		if busyAnswered(i) {
			text = "@marlowe_test_bot question " + itoa(int64(i))
		}
		mu.Lock()
		_, id := f.Inject(telegramfake.Incoming{Chat: group, From: busyPeople[i%len(busyPeople)], Text: text})
		lastIn = time.Now()
		at[itoa(id)] = lastIn
		mu.Unlock()
		if i < msgs-1 {
			time.Sleep(every)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	want := 0
	for i := range msgs {
		if busyAnswered(i) {
			want++
		}
	}
	if err := f.Wait(ctx, func() bool { return len(f.Sent()) >= want }); err != nil {
		b.Fatalf("answers: %d of %d", len(f.Sent()), want)
	}
	wg.Wait()
	stop()
	for m, ds := range st.byMethod {
		b.Logf("%-20s n=%d p50=%v p99=%v max=%v", m, len(ds), pct(ds, 50), pct(ds, 99), pct(ds, 100))
	}
	b.Logf("answer ready→posted p50=%v p99=%v max=%v; arrival→posted p50=%v max=%v", pct(st.ready, 50), pct(st.ready, 99), pct(st.ready, 100), pct(st.arrival, 50), pct(st.arrival, 100))
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(pct(st.ready, 50)), "answer-p50-ms")
	b.ReportMetric(ms(pct(st.ready, 99)), "answer-p99-ms")
	b.ReportMetric(ms(pct(st.ready, 100)), "answer-max-ms")
	b.ReportMetric(ms(st.lastCall.Sub(lastIn)), "last-call-after-last-msg-ms")
	// What the fake saw: Telegram's message limits, counted on its side.
	var sends []time.Time
	for _, c := range f.Calls() {
		if c.Method == "sendMessage" {
			sends = append(sends, c.At)
		}
	}
	perMin, perSec := 0, 0
	for i := range sends {
		m, s := 0, 0
		for _, u := range sends[i:] {
			if u.Sub(sends[i]) < time.Minute {
				m++
			}
			if u.Sub(sends[i]) < time.Second {
				s++
			}
		}
		perMin, perSec = max(perMin, m), max(perSec, s)
	}
	b.ReportMetric(float64(perMin), "max-msgs/min")
	b.ReportMetric(float64(perSec), "max-msgs/s")
	if perMin > 20 {
		b.Errorf("%d messages in one minute in a group (Telegram: 20)", perMin)
	}
}
