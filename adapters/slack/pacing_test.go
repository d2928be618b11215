package slack

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/internal/pacer/pacertest"
)

// Slack counts per method: chat.postMessage about one a second per
// channel, reactions.add on a Tier 3 budget of its own, chat.update on its
// own queue.
// Four mentions in one channel at once (the channel's burst), each
// answered with a 👀, the answer, and an edit of it, at the default pace
// (1/s per channel, burst 4): every answer goes without waiting on the
// (stopped) fake clock; the edits go on their own budget, as the clock
// moves. The old pacer put the 👀 and the edits in the
// channel's bucket with the answers, and the fifth call of the channel
// waited for a token that, on a stopped clock, never came.
func TestSlackAnswersTakeNoBudgetFromReactionsOrEdits(t *testing.T) {
	f := newFake(t)
	a, _ := newAdapter(t, testConfig(f, ModeSocket), WithChannelPace(time.Second, 4))
	clock := pacertest.New()
	a.pacer = newPacer(clock.Now, clock.After, a.pace, a.log)
	ctx := t.Context()
	done := make(chan error, 1)
	var edits sync.WaitGroup
	go func() {
		for i := range 4 {
			ts := f.AddMessage(chPublic, "", alice, fmt.Sprint("question ", i))
			ref := core.MessageRef{Scope: core.Scope{Platform: Platform, Channel: chPublic}, ID: ts}
			if err := a.React(ctx, ref, "eyes"); err != nil {
				done <- err
				return
			}
			sc := core.Scope{Platform: Platform, Channel: chPublic, Thread: ts}
			posted, err := a.Post(ctx, core.Outbound{Key: fmt.Sprint("ans-", i), Scope: sc, Text: fmt.Sprint("answer ", i), Priority: core.PriorityHigh})
			if err != nil {
				done <- err
				return
			}
			// The edit is not awaited: edits wait their turn, answers never.
			edits.Go(func() {
				if err := a.Update(ctx, posted, core.Outbound{Text: fmt.Sprint("answer ", i, " (edited)"), Priority: core.PriorityEdit}); err != nil {
					t.Error(err)
				}
			})
		}
		done <- nil
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("answers waited for pacing: %d posted of 4, %d reactions, %d updates", len(f.Posts()), f.CallCount("reactions.add"), f.CallCount("chat.update"))
	}
	if n := len(f.Posts()); n != 4 {
		t.Fatalf("%d answers posted, want 4", n)
	}
	if n := f.CallCount("reactions.add"); n != 4 {
		t.Errorf("%d reactions, want 4 (within reactions.add's burst)", n)
	}
	editsDone := make(chan struct{})
	go func() { edits.Wait(); close(editsDone) }()
	for waiting := true; waiting; {
		clock.Advance(time.Second)
		select {
		case <-editsDone:
			waiting = false
		case <-time.After(10 * time.Millisecond):
		}
	}
	if n := f.CallCount("chat.update"); n != 4 {
		t.Errorf("%d edits sent, want 4", n)
	}
	clock.Advance(time.Hour) // the queues run dry and exit
}

// Over reactions.add's budget a 👀 is dropped, not queued: React returns
// at once, without error, and never sends it later.
func TestSlackReactionsOverBudgetAreDropped(t *testing.T) {
	f := newFake(t)
	a, _ := newAdapter(t, testConfig(f, ModeSocket), WithChannelPace(time.Second, 4))
	clock := pacertest.New()
	a.pacer = newPacer(clock.Now, clock.After, a.pace, a.log)
	ctx := context.Background()
	for i := range tier3Burst + 5 {
		ts := f.AddMessage(fmt.Sprintf("C%08d", i), "", alice, "hi")
		if err := a.React(ctx, core.MessageRef{Scope: core.Scope{Channel: fmt.Sprintf("C%08d", i)}, ID: ts}, "eyes"); err != nil {
			t.Fatal(err)
		}
	}
	if n := f.CallCount("reactions.add"); n != tier3Burst {
		t.Fatalf("%d reactions sent, want %d (the rest dropped)", n, tier3Burst)
	}
	if st := a.OutboundStats(); st.Dropped != 5 || st.Queued != 0 {
		t.Fatalf("stats %+v, want 5 dropped and none queued", st)
	}
	clock.Advance(time.Hour)
	if n := f.CallCount("reactions.add"); n != tier3Burst {
		t.Fatalf("a dropped reaction was sent later (%d sent)", n)
	}
}
