package engine_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/coretest"
	"github.com/marlowe-bot/marlowe/engine"
)

// unfencedLog records the appends made without a lease fence: on
// PostgreSQL each sends a NOTIFY (TestOnlyUnfencedAppendsNotify in
// store/postgres), which serialises commits server-wide.
type unfencedLog struct {
	core.Journal
	mu    sync.Mutex
	kinds []core.Kind
}

func (j *unfencedLog) Append(ctx context.Context, d ...core.Draft) ([]core.Command, error) {
	cmds, err := j.Journal.Append(ctx, d...)
	j.record(cmds)
	return cmds, err
}

func (j *unfencedLog) AppendAt(ctx context.Context, exp core.Expect, d ...core.Draft) ([]core.Command, error) {
	cmds, err := j.Journal.AppendAt(ctx, exp, d...)
	if exp.Fence == nil {
		j.record(cmds)
	}
	return cmds, err
}

func (j *unfencedLog) record(cmds []core.Command) {
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, c := range cmds {
		j.kinds = append(j.kinds, c.Kind())
	}
}

func (j *unfencedLog) unfenced() []core.Kind {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]core.Kind(nil), j.kinds...)
}

// A lone replica sends no NOTIFY: the messages it receives on a channel it
// owns are journaled under the channel's lease fence, like its runs' steps,
// so nothing it journals for a conversation is an unfenced append. (Before,
// every message received was journaled unfenced and notified nobody who
// listened.) Another replica's ingress on the channel still notifies:
// TestOnlyTheOwnerDrivesAChannel.
func TestLoneReplicaJournalsEveryMessageFenced(t *testing.T) {
	mem := coretest.NewMemJournal(coretest.NewSigner(t))
	j := &unfencedLog{Journal: mem}
	s := coretest.NewFakeSurface(platform, botID)
	m := coretest.NewScriptedModel(coretest.Text("an answer"))
	e, err := engine.New(engine.Config{
		Journal: j, Boundary: core.NewBoundary(time.Now), Model: m,
		Surfaces: map[string]core.Surface{platform: s},
		Router: core.RouterFunc(func(ctx context.Context, ev core.Event) (bool, string, error) {
			return ev.MentionsBot || ev.Scope.Thread != "", "test", nil
		}),
		Logger: slog.New(slog.DiscardHandler), CardKey: cardKey, ChecklistDelay: time.Hour,
		Leases: mem, Replica: "solo", LeaseTTL: 2 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	root := core.Event{Scope: chanScope("C1"), Visibility: core.Public, MessageID: "M1", Author: alice,
		Text: "<@" + botID + "> first", MentionsBot: true, At: time.Now()}
	if err := e.Deliver(t.Context(), core.Inbound{Event: &root}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the first answer", func() bool { return len(s.Posts()) == 1 })
	sc := chanScope("C1")
	sc.Thread = "M1"
	if err := e.Deliver(t.Context(), core.Inbound{Event: &core.Event{Scope: sc, Visibility: core.Public, MessageID: "M2", Author: bob, Text: "and this", At: time.Now()}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the second answer", func() bool { return len(s.Posts()) == 2 })
	if err := e.WaitIdle(t.Context()); err != nil {
		t.Fatal(err)
	}
	received := 0
	for _, c := range mem.All(chanScope("C1").Key()) {
		if c.Kind() == core.KindMessageReceived {
			received++
		}
	}
	if received != 2 {
		t.Fatalf("%d messages journaled, want 2", received)
	}
	if u := j.unfenced(); len(u) != 0 {
		t.Fatalf("a lone replica journaled %d commands unfenced (each a NOTIFY on PostgreSQL): %v", len(u), u)
	}
}

// Attack (a deposed receiver): a replica whose books still say it owns a
// channel (it cannot renew; another replica took the lapsed lease over)
// receives a mention there. Its fenced append of the message is refused,
// so it journals the message unfenced instead (notifying the new owner),
// and the new owner answers it: the message is neither lost nor answered
// by the deposed one.
func TestDeposedReceiverJournalsTheMessageForTheNewOwner(t *testing.T) {
	c := newCluster(t)
	ma := coretest.NewScriptedModel(coretest.Text("answer from a"), coretest.Text("answer from a"))
	a := c.add("a", ma, func(l core.Leases) core.Leases { return renewFails{l} })
	deliverTo(t, a, core.Event{Scope: chanScope("C1"), Visibility: core.Public, MessageID: "M1", Author: alice,
		Text: "<@" + botID + "> first", MentionsBot: true, At: time.Now()})
	waitFor(t, "a's answer", func() bool { return answers(a.s, "answer from a") == 1 })
	mb := coretest.NewScriptedModel(coretest.Text("answer from b"))
	b := c.add("b", mb, nil)
	waitFor(t, "b to take the lapsed channel over", func() bool {
		return strings.Contains(b.logs.String(), `msg="took over a lapsed channel" channel=`+string(chanScope("C1").Key()))
	})
	if _, owns := a.e.Owns(chanScope("C1").Key()); !owns {
		t.Fatal("a's books no longer hold C1: the attack needs a replica that thinks it still owns the channel")
	}
	deliverTo(t, a, core.Event{Scope: chanScope("C1"), Visibility: core.Public, MessageID: "M2", Author: bob,
		Text: "<@" + botID + "> second", MentionsBot: true, At: time.Now()})
	waitFor(t, "b's answer to the message a received", func() bool { return answers(b.s, "answer from b") == 1 })
	_ = a.e.WaitIdle(t.Context())
	_ = b.e.WaitIdle(t.Context())
	if n := answers(a.s, "answer from a"); n != 1 {
		t.Errorf("the deposed replica posted %d answers, want only its first", n)
	}
	if n := c.count("C1", core.KindMessageReceived); n != 2 {
		t.Errorf("%d messages journaled, want 2", n)
	}
}
