package engine_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/coretest"
	"github.com/marlowe-bot/marlowe/engine"
)

// Close cancels in-flight runs (a hung model call included), waits for every
// goroutine, and the next engine resumes the run from the journal.
func TestCloseMidRunLeavesNoGoroutinesAndResumes(t *testing.T) {
	before := runtime.NumGoroutine()
	inCall := make(chan struct{}, 1)
	hang := true
	var mu sync.Mutex
	m := coretest.NewScriptedModel(coretest.Text("finally"))
	m.OnCall = func(ctx context.Context, n int, v core.View) {
		mu.Lock()
		h := hang
		mu.Unlock()
		if h {
			inCall <- struct{}{}
			<-ctx.Done()
		}
	}
	h := newHarness(t, m, nil, func(c *engine.Config) { c.ChecklistDelay = 20 * time.Millisecond })
	for i := range 5 {
		h.deliver(h.mention(alice, "C1", fmt.Sprintf("question %d", i)))
		<-inCall
	}
	// The calls take long: each run shows its checklist.
	h.clk.Advance(time.Second)
	coretest.WaitFor(t, 5*time.Second, "five checklists", func() bool { return checklists(h) == 5 })
	done := make(chan struct{})
	go func() { _ = h.e.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return with model calls in flight")
	}
	if err := h.e.Deliver(context.Background(), core.Inbound{Event: &core.Event{}}); err == nil {
		t.Errorf("Deliver accepted work after Close")
	}
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<16)
		t.Fatalf("goroutines: %d before, %d after Close\n%s", before, n, buf[:runtime.Stack(buf, true)])
	}
	// Nothing was marked failed by the shutdown: the runs resume.
	for _, r := range h.runs("C1") {
		if r.Status != core.RunWorking {
			t.Fatalf("run %s after shutdown, want working", r.Status)
		}
	}
	mu.Lock()
	hang = false
	mu.Unlock()
	h.start()
	h.idle()
	if n := h.count("C1", core.KindRunCompleted); n != 5 {
		t.Errorf("completed after restart = %d", n)
	}
	// One checklist per run: the restart did not post a second one, and
	// each (listing nothing) ends as the run's answer.
	if n := checklists(h); n != 5 {
		t.Errorf("checklists = %d", n)
	}
	for _, p := range h.s.Posts() {
		if cur, _ := h.s.Current(p.Ref.ID); strings.HasPrefix(p.Out.Text, "⏳") && cur.Text != "finally" {
			t.Errorf("checklist ends as %q", cur.Text)
		}
	}
}

func checklists(h *harness) int {
	n := 0
	for _, p := range h.s.Posts() {
		if strings.HasPrefix(p.Out.Text, "⏳") {
			n++
		}
	}
	return n
}

func TestManyThreadsWithSteering(t *testing.T) {
	m := coretest.NewScriptedModel(
		coretest.Calls(coretest.Call("", "note", `{"text":"x"}`)),
		coretest.Text("a"), coretest.Text("b"), coretest.Text("c"), coretest.Text("d"),
	)
	log := &toolLog{}
	h := newHarness(t, m, []core.Tool{noteTool(log)})
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ch := fmt.Sprintf("C%d", i%3)
			ev := h.mention(alice, ch, "start")
			h.deliver(ev)
			for j := range 3 {
				h.deliver(h.inThread(bob, ch, ev.MessageID, fmt.Sprintf("more %d", j)))
			}
		}()
	}
	wg.Wait()
	h.idle()
	for i := range 3 {
		ch := fmt.Sprintf("C%d", i)
		for id, r := range h.runs(ch) {
			if r.Status != core.RunDone {
				t.Errorf("%s run %s: %s %s", ch, id, r.Status, r.Reason)
			}
		}
		// Never two live runs in one thread: a run starts in a thread only
		// after the previous one there has ended.
		live := map[string]string{} // thread → live run
		for _, c := range h.j.All(chanScope(ch).Key()) {
			switch c.Kind() {
			case core.KindRunStarted:
				if other := live[c.Scope().Thread]; other != "" {
					t.Errorf("%s: run %s started while %s was live in thread %s", ch, c.Run(), other, c.Scope().Thread)
				}
				live[c.Scope().Thread] = c.Run()
			case core.KindRunCompleted, core.KindRunFailed:
				delete(live, c.Scope().Thread)
			}
		}
		// Every message was seen by some model call: each received message
		// is either a trigger or listed as steering in a model.step.
		seen := map[string]bool{}
		for _, c := range h.j.All(chanScope(ch).Key()) {
			if c.Kind() == core.KindModelStep {
				p, _ := core.Decode[*core.ModelStep](c)
				for _, id := range p.Steering {
					seen[id] = true
				}
			}
			if c.Kind() == core.KindRunStarted {
				seen[c.Cause()] = true
			}
		}
		for _, c := range h.j.All(chanScope(ch).Key()) {
			if c.Kind() == core.KindMessageReceived && !seen[c.ID()] {
				t.Errorf("%s: message %s never reached the model", ch, c.ID())
			}
		}
		h.verify(ch)
	}
}

func TestDeliverRejectsMalformedInbound(t *testing.T) {
	h := newHarness(t, coretest.NewScriptedModel(), nil)
	ctx := context.Background()
	bad := []core.Inbound{
		{},
		{Event: &core.Event{}, Click: &core.CardClick{}},
		{Event: &core.Event{Scope: chanScope("C1"), MessageID: "M1"}},                                               // no author
		{Event: &core.Event{Scope: core.Scope{Platform: "nope", Channel: "C1"}, MessageID: "M1", Author: alice}},    // no surface
		{Event: &core.Event{Scope: core.Scope{Platform: platform, Channel: "a/b"}, MessageID: "M1", Author: alice}}, // bad scope
	}
	for i, in := range bad {
		if err := h.e.Deliver(ctx, in); err == nil {
			t.Errorf("case %d accepted", i)
		}
	}
}

func TestNewEngineRequiresItsPorts(t *testing.T) {
	_, err := engine.New(engine.Config{})
	if err == nil {
		t.Fatal("empty config accepted")
	}
	for _, want := range []string{"journal", "boundary", "surface", "router", "card key"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
}

func TestPlatformErrorIsRetried(t *testing.T) {
	h := newHarness(t, coretest.NewScriptedModel(coretest.Text("answer")), nil)
	var mu sync.Mutex
	fails := 2
	h.s.FailPost = func(out core.Outbound) error {
		mu.Lock()
		defer mu.Unlock()
		if out.Text == "answer" && fails > 0 {
			fails--
			return fmt.Errorf("platform hiccup")
		}
		return nil
	}
	h.deliver(h.mention(alice, "C1", "q"))
	h.idle()
	if n := h.count("C1", core.KindRunCompleted); n != 1 {
		t.Fatalf("run.completed = %d", n)
	}
	if p, ok := h.s.Find("answer"); !ok || h.s.Attempts(p.Out.Key) != 3 {
		t.Errorf("answer attempts = %d, want 3 with one key", h.s.Attempts(p.Out.Key))
	}
	if m := h.m.Calls(); m != 1 {
		t.Errorf("model calls = %d: a retry must not repeat a journaled step", m)
	}
}
