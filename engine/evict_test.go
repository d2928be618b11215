package engine_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/coretest"
	"github.com/marlowe-bot/marlowe/engine"
)

// readCounter counts Read calls per channel: what start-up folds.
type readCounter struct {
	core.Journal
	mu    sync.Mutex
	reads map[core.ChannelKey]int
}

func (r *readCounter) Read(ctx context.Context, ch core.ChannelKey, from uint64, limit int) ([]core.Command, error) {
	r.mu.Lock()
	if r.reads == nil {
		r.reads = map[core.ChannelKey]int{}
	}
	r.reads[ch]++
	r.mu.Unlock()
	return r.Journal.Read(ctx, ch, from, limit)
}

func (r *readCounter) snapshot() map[core.ChannelKey]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[core.ChannelKey]int{}
	for k, v := range r.reads {
		out[k] = v
	}
	r.reads = nil
	return out
}

func withReadCounter(rc **readCounter) func(*engine.Config) {
	return func(cfg *engine.Config) {
		*rc = &readCounter{Journal: cfg.Journal}
		cfg.Journal = *rc
	}
}

// Attack: a channel's fold is evicted, then the platform redelivers a
// message the bot already answered. The reloaded fold must still know the
// message id: no second run, no second answer.
func TestEvictedChannelRedeliveryStartsNoSecondRun(t *testing.T) {
	m := coretest.NewScriptedModel(coretest.Text("first answer"), coretest.Text("second answer"))
	h := newHarness(t, m, nil, func(cfg *engine.Config) { cfg.ChannelIdle = time.Minute })
	ev := h.mention(alice, "C1", "hello")
	h.deliver(ev)
	h.idle()
	key := chanScope("C1").Key()
	if h.count("C1", core.KindRunCompleted) != 1 {
		t.Fatalf("first run did not complete: %v", h.kinds("C1"))
	}
	if n := h.e.EvictIdle(); n != 0 || !h.e.Loaded(key) {
		t.Fatalf("evicted %d channels touched just now", n)
	}
	h.clk.Advance(2 * time.Minute)
	if n := h.e.EvictIdle(); n != 1 || h.e.Loaded(key) {
		t.Fatalf("evicted %d channels, loaded %v: want C1 dropped", n, h.e.Loaded(key))
	}

	h.deliver(ev) // redelivery, same message id
	h.idle()
	if n := h.count("C1", core.KindRunStarted); n != 1 {
		t.Fatalf("run.started = %d after redelivery to an evicted channel, want 1: %v", n, h.kinds("C1"))
	}
	if n := h.count("C1", core.KindMessageReceived); n != 1 {
		t.Errorf("message.received = %d, want the message journaled once", n)
	}
	if m.Calls() != 1 || len(h.s.Posts()) != 1 {
		t.Errorf("model calls %d, posts %d: want one answer", m.Calls(), len(h.s.Posts()))
	}
	if !h.e.Loaded(key) {
		t.Errorf("the redelivery did not fold the channel again")
	}
	// A new message in the reloaded channel still runs.
	h.deliver(h.mention(alice, "C1", "again"))
	h.idle()
	if n := h.count("C1", core.KindRunStarted); n != 2 || m.Calls() != 2 {
		t.Errorf("after a new message: run.started %d, model calls %d, want 2 and 2", n, m.Calls())
	}
}

// A channel with a pending approval is never evicted, however long it
// waits; once decided and finished, it is.
func TestEvictionSparesPendingApproval(t *testing.T) {
	h, log, ev := wipeHarness(t, func(cfg *engine.Config) { cfg.ChannelIdle = time.Minute })
	key := chanScope("C1").Key()
	h.clk.Advance(time.Hour)
	if n := h.e.EvictIdle(); n != 0 || !h.e.Loaded(key) {
		t.Fatalf("evicted %d channels: a channel waiting for approval was dropped", n)
	}
	card, _ := cardOf(h)
	h.click(bob, token(card, "approve"), threadOf(ev))
	h.idle()
	if len(log.get()) != 1 || h.count("C1", core.KindRunCompleted) != 1 {
		t.Fatalf("approved run: tool calls %v, journal %v", log.get(), h.kinds("C1"))
	}
	h.clk.Advance(2 * time.Minute)
	if n := h.e.EvictIdle(); n != 1 || h.e.Loaded(key) {
		t.Fatalf("evicted %d channels after the run ended, want 1", n)
	}
}

// Start folds only the channels with unfinished work: here 20 finished
// channels, one with a run that was working at the crash, one whose failed
// run never posted its end notice, one whose run was superseded (no
// notice due). The first two are resumed; nothing else is read.
func TestStartFoldsOnlyUnfinishedChannels(t *testing.T) {
	steps := []coretest.Step{}
	for range 21 {
		steps = append(steps, coretest.Text("done"))
	}
	m := coretest.NewScriptedModel(steps...)
	var rc *readCounter
	h := newHarness(t, m, nil, withReadCounter(&rc))
	for i := range 20 {
		h.deliver(h.mention(alice, fmt.Sprintf("C%02d", i), "hi"))
	}
	h.idle()

	// Write the crashed channels' journals directly.
	appendRun := func(ch, run string, tail ...core.Payload) {
		t.Helper()
		id := h.msgID()
		sc := chanScope(ch)
		mr, err := h.b.Human(alice, sc, core.Meta{Run: run}, &core.MessageReceived{MessageID: id, Author: alice,
			Visibility: core.Public, Text: "<@" + botID + "> hi", Reason: "mention"})
		if err != nil {
			t.Fatal(err)
		}
		sc.Thread = id
		rs, err := h.b.Agent(run, sc, core.Meta{Cause: mr.ID()}, &core.RunStarted{Trigger: id})
		if err != nil {
			t.Fatal(err)
		}
		drafts := []core.Draft{mr, rs}
		for _, p := range tail {
			d, err := h.b.Agent(run, sc, core.Meta{}, p)
			if err != nil {
				t.Fatal(err)
			}
			drafts = append(drafts, d)
		}
		if _, err := h.j.Append(context.Background(), drafts...); err != nil {
			t.Fatal(err)
		}
	}
	appendRun("CWORK", "run-work")
	appendRun("CFAIL", "run-fail", &core.RunFailed{Status: core.RunBroken, Cause: "the tool broke"})
	appendRun("CSUP", "run-sup", &core.RunFailed{Status: core.RunCancelled, Cause: "superseded by a new message in the thread"})

	_ = h.e.Close()
	rc.snapshot()
	h.start()
	h.idle()
	reads := rc.snapshot()
	for ch := range reads {
		if ch != chanScope("CWORK").Key() && ch != chanScope("CFAIL").Key() {
			t.Errorf("start-up read channel %s, which has no unfinished work (reads: %v)", ch, reads)
		}
	}
	if h.count("CWORK", core.KindRunCompleted) != 1 {
		t.Errorf("the working run was not resumed: %v", h.kinds("CWORK"))
	}
	if _, ok := h.s.Find("the tool broke"); !ok {
		t.Errorf("the failed run's end notice was not posted (%d posts)", len(h.s.Posts()))
	}
	if h.count("CSUP", core.KindMessagePosted) != 0 {
		t.Errorf("a superseded run posted a notice: %v", h.kinds("CSUP"))
	}
}
