package scheduler_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/coretest"
	"github.com/marlowe-bot/marlowe/scheduler"
)

// firingModel answers each routine run with "report #n" padded to size(n)
// characters and keeps the opening messages of each run it saw.
type firingModel struct {
	mu     sync.Mutex
	seeds  []string
	size   func(n int) int
	script *coretest.ScriptedModel
}

func newFiringModel(size func(int) int) *firingModel {
	m := &firingModel{size: size}
	m.script = coretest.NewScriptedModel(func(v core.View) (core.Reply, error) {
		m.mu.Lock()
		defer m.mu.Unlock()
		// The run's opening: its instruction and the context after it.
		var texts []string
		for _, msg := range v.Messages {
			if msg.Role == core.RoleAssistant {
				break
			}
			texts = append(texts, msg.Text)
		}
		m.seeds = append(m.seeds, strings.Join(texts, "\n"))
		head := fmt.Sprintf("report #%d ", len(m.seeds))
		return core.Reply{Text: head + strings.Repeat("x", max(0, m.size(len(m.seeds))-len(head)))}, nil
	})
	return m
}

func (m *firingModel) seed(i int) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if i >= len(m.seeds) {
		return ""
	}
	return m.seeds[i]
}

func TestModelRoutineRunsUnattendedOncePerSlotSeededWithHistory(t *testing.T) {
	m := newFiringModel(func(int) int { return 300 })
	w := newModelWorld(t, m.script)
	id := routineID(t, w.say(alice, "routine add @every 10m: count the open tickets"))
	w.clk.Advance(10 * time.Minute)
	w.tick()
	w.idle()
	d := w.digests()
	if len(d) != 1 || !strings.HasPrefix(d[0], "report #1") {
		t.Fatalf("top-level posts after the first slot: %q", d)
	}
	if s := m.seed(0); !strings.HasPrefix(s, "Scheduled task (unattended") || !strings.Contains(s, "count the open tickets") ||
		!strings.Contains(s, "first successful firing") || !strings.Contains(s, "Routine "+id+": count the open tickets") {
		t.Fatalf("first run's seed: %q", s)
	}
	// A retry, a restart and a second start of the same firing start nothing.
	w.tick()
	w.restart()
	w.tick()
	var rf *core.RunStarted
	var runID string
	for _, c := range w.j.All(room.Key()) {
		if c.Kind() == core.KindRunStarted {
			if p, _ := core.Decode[*core.RunStarted](c); p.Unattended {
				rf, runID = p, c.Run()
			}
		}
	}
	if n := w.count(core.KindRunStarted); n != 2 || rf == nil || rf.Trigger != "routine:"+id { // the add command's run + the firing's
		t.Fatalf("%d run.started, unattended %+v", n, rf)
	}
	again, err := w.e.StartUnattended(context.Background(), core.UnattendedRun{Scope: room, Owner: alice, Instruction: "x", Trigger: "routine:" + id, RunID: runID})
	if err != nil || again != runID || w.count(core.KindRunStarted) != 2 {
		t.Fatalf("second start of %s: %q, %v; %d run.started", runID, again, err, w.count(core.KindRunStarted))
	}
	if l := w.say(alice, "routines"); !strings.Contains(l, "run done, posted") {
		t.Fatalf("list: %q", l)
	}
	// The next firing is told what the last one produced.
	w.clk.Advance(10 * time.Minute)
	w.tick()
	w.idle()
	if s := m.seed(1); !strings.Contains(s, "--- Run history ---") || !strings.Contains(s, "It posted:\nreport #1") {
		t.Fatalf("second run's seed lacks the run history: %q", s)
	}
	if d := w.digests(); len(d) != 2 || !strings.HasPrefix(d[1], "report #2") {
		t.Fatalf("posts: %q", d)
	}
}

func TestModelRoutineSkipsRatherThanOverdraw(t *testing.T) {
	m := newFiringModel(func(int) int { return 100 })
	w := newModelWorld(t, m.script)
	id := routineID(t, w.say(alice, "routine add @every 10m: summarise"))
	if r := w.say(core.Person{ID: "UADMIN"}, "policy set budget 100"); !strings.Contains(strings.ToLower(r), "budget") {
		t.Fatalf("policy: %q", r)
	}
	w.clk.Advance(10 * time.Minute)
	w.tick()
	w.idle() // this run spends 120 tokens: the day's 100 are gone
	w.clk.Advance(10 * time.Minute)
	w.tick()
	w.idle()
	f := w.fired()
	if len(f) != 2 || f[1].Outcome != scheduler.OutcomeSkipped || !strings.Contains(f[1].Reason, "daily token budget") {
		t.Fatalf("fired: %+v", f)
	}
	if n := len(m.seeds); n != 1 {
		t.Fatalf("%d model runs, want 1 (the second slot must not overdraw)", n)
	}
	if dm := w.dms(alice.ID); len(dm) != 1 || !strings.Contains(dm[0], "Routine "+id+" skipped") {
		t.Fatalf("owner's DM: %q", dm)
	}
	if l := w.say(alice, "routines"); !strings.Contains(l, "daily token budget is used up") {
		t.Fatalf("list: %q", l)
	}
}

func TestUndeliveredPostIsShownAndReportedNeverDone(t *testing.T) {
	w := newWorld(t)
	id := routineID(t, w.say(alice, "routine add @every 10m: digest"))
	w.s.FailPost = func(out core.Outbound) error {
		if out.Scope.Channel == room.Channel && out.Scope.Thread == "" {
			return context.DeadlineExceeded
		}
		return nil
	}
	w.clk.Advance(10 * time.Minute)
	_ = w.sch.Tick(context.Background())
	w.clk.Advance(time.Minute)
	_ = w.sch.Tick(context.Background()) // retried
	w.clk.Advance(2 * time.Hour)
	_ = w.sch.Tick(context.Background())
	l := w.say(alice, "routines")
	if !strings.Contains(l, "1 earlier post(s) FAILED (latest slot 2026-03-02 08:10 UTC)") || strings.Contains(l, ": posted") {
		t.Fatalf("list: %q", l)
	}
	var never int
	for _, dm := range w.dms(alice.ID) {
		if strings.Contains(dm, "Routine "+id+": the Mon 2 Mar 08:10 UTC post never arrived") {
			never++
		}
	}
	if never != 1 {
		t.Fatalf("owner's DM: %q", w.dms(alice.ID))
	}
	if n := len(w.digests()); n != 0 {
		t.Fatalf("%d digests arrived through a failing post", n)
	}
}
