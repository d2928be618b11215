package scheduler_test

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/scheduler"
)

// decline is a routine's output size losing 8% a firing: never a big step.
func decline(n int) int { return int(1000 * math.Pow(0.92, float64(n-1))) }

// The slow-decline case, on the detector the scheduler uses: compared with
// a rolling baseline (the five firings before the last three) it never
// fires; compared with the frozen anchor of the first five it does.
func TestDriftSlowDeclineRollingNeverFrozenDoes(t *testing.T) {
	var stats []scheduler.Stats
	for n := 1; n <= 20; n++ {
		stats = append(stats, scheduler.Stats{OutputChars: decline(n), Duration: 2 * time.Second, ToolCalls: 1})
	}
	mean := func(s []scheduler.Stats) scheduler.Stats {
		var t scheduler.Stats
		for _, x := range s {
			t.OutputChars += x.OutputChars
		}
		return scheduler.Stats{OutputChars: t.OutputChars / len(s), Duration: 2 * time.Second, ToolCalls: 1}
	}
	anchor := mean(stats[:scheduler.SettleFirings])
	frozenAt := 0
	for i := scheduler.SettleFirings + scheduler.SustainedFirings; i <= len(stats); i++ {
		recent := stats[i-scheduler.SustainedFirings : i]
		rolling := mean(stats[i-scheduler.SustainedFirings-scheduler.SettleFirings : i-scheduler.SustainedFirings])
		if m := scheduler.Sustained(rolling, recent); len(m) > 0 {
			t.Fatalf("rolling baseline fired at firing %d: %v", i, m)
		}
		if frozenAt == 0 && len(scheduler.Sustained(anchor, stats[scheduler.SettleFirings:i])) > 0 {
			frozenAt = i
		}
	}
	if frozenAt == 0 {
		t.Fatal("the frozen anchor never noticed a decline to a fifth of the output")
	}
}

// End to end on a fake clock: a model routine whose answers shrink 8% a
// firing settles on its first five, then the owner gets one drift card; an
// edit re-settles it (no card while settling) and the card after the next
// drift compares with the anchor from before the edit too.
func TestDriftReportReachesTheOwnerOnceAndEditResettles(t *testing.T) {
	m := newFiringModel(decline)
	w := newModelWorld(t, m.script)
	id := routineID(t, w.say(alice, "routine add @every 10m: weekly report"))
	drift := func() []string {
		var out []string
		for _, dm := range w.dms(alice.ID) {
			if strings.Contains(dm, "Routine "+id+" has drifted: output size") {
				out = append(out, dm)
			}
		}
		return out
	}
	fire := func(n int) {
		for range n {
			w.clk.Advance(10 * time.Minute)
			w.tick()
			w.idle()
		}
	}
	fire(scheduler.SettleFirings)
	if l := w.say(alice, "routines"); strings.Contains(l, "settling") {
		t.Fatalf("not settled after %d firings: %q", scheduler.SettleFirings, l)
	}
	fire(3)
	if d := drift(); len(d) != 0 {
		t.Fatalf("drift reported after a 20%% decline: %q", d)
	}
	fire(6)
	w.tick()
	if d := drift(); len(d) != 1 {
		t.Fatalf("drift cards: %q (owner DM: %q)", d, w.dms(alice.ID))
	}
	// An edit (journaled as routine.changed) re-settles the routine.
	d, err := w.b.Human(alice, room, core.Meta{}, &core.RoutineChanged{RoutineID: id, Instruction: "weekly report, shorter", Armed: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.j.Append(t.Context(), d); err != nil {
		t.Fatal(err)
	}
	w.tick()
	if l := w.say(alice, "routines"); !strings.Contains(l, "settling (0 of 5 firings)") {
		t.Fatalf("edit did not re-settle: %q", l)
	}
	fire(scheduler.SettleFirings + 2)
	if d := drift(); len(d) != 1 {
		t.Fatalf("drift reported while re-settling or against the old anchor: %q", d)
	}
}
