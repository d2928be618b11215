package telegram

import (
	"sync"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/adapters/telegram/telegramfake"
	"github.com/marlowe-bot/marlowe/internal/pacer/pacertest"
)

// TestBusyGroupAnswersBeforeTheNextMessage is the busy group end to end
// against the fake Bot API, at Telegram's limits (1 message/s per chat
// after a burst of 3, 20 a minute in a group, 30 calls/s): a message every
// 2.5 s from three people, 13 of every 24 answered, each answer costing a
// 👀, a typing action and the message. The pacer runs on a fake clock that
// moves only to the next message's arrival, so an answer the pacer held
// for any time at all would not be posted before the next message: every
// one must be. The old pacer queued each 👀 with the answers; from the
// fourth answer on, each waited for the chat's budget (seconds), and this
// test failed at the first of them.
func TestBusyGroupAnswersBeforeTheNextMessage(t *testing.T) {
	f := newFake(t)
	a, _ := newAdapter(t, testConfig(f, ModePolling), WithPace(time.Second, 3, 20, 30))
	clock := pacertest.New()
	a.pacer = newPacer(clock.Now, clock.After, a.pace, a.log)
	var st busyStats
	var mu sync.Mutex
	at := map[string]time.Time{}
	injected := func(id string) time.Time { mu.Lock(); defer mu.Unlock(); return at[id] }
	var wg sync.WaitGroup
	run(t, a, busyEngine(a, clock.Now, 0, &st, injected, &wg))

	const msgs, every = 48, 2500 * time.Millisecond // two minutes of the group
	start := clock.Now()
	answered := 0
	for i := range msgs {
		clock.AdvanceTo(start.Add(time.Duration(i) * every))
		text := "chatter in the group"
		if busyAnswered(i) {
			text = "@marlowe_test_bot question " + itoa(int64(i))
		}
		mu.Lock()
		_, id := f.Inject(telegramfake.Incoming{Chat: group, From: busyPeople[i%len(busyPeople)], Text: text})
		at[itoa(id)] = clock.Now()
		mu.Unlock()
		if !busyAnswered(i) {
			continue
		}
		answered++
		if !st.await(answered) {
			t.Fatalf("message %d (fake %v): its answer was not posted before the next message arrived (%d answers posted, want %d)",
				i, clock.Now().Sub(start), len(f.Sent()), answered)
		}
	}
	wg.Wait()
	if n := len(st.arrival); n != answered {
		t.Fatalf("%d answers measured, want %d", n, answered)
	}
	if worst := pct(st.arrival, 100); worst > 0 {
		t.Errorf("an answer was held %v by pacing (fake clock)", worst)
	}
	if got := f.CallCount("setMessageReaction"); got != answered {
		t.Errorf("%d reactions sent, want %d (one per answer, within the chat's own budget)", got, answered)
	}
	// Let the chat's queue run dry and exit.
	clock.Advance(2 * time.Minute)
}
