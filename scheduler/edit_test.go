package scheduler_test

import (
	"strings"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/scheduler"
)

// TestRoutineEdit: the owner (or an admin) changes a routine's schedule,
// zone or instruction in place. Slots of the new schedule that fell before
// the edit neither fire nor count as missed; a paused routine stays paused;
// a schedule that would not be accepted for a new routine changes nothing.
func TestRoutineEdit(t *testing.T) {
	w := newWorld(t) // 2026-03-02 08:00 UTC
	id := routineID(t, w.say(alice, "routine add 0 9 * * *: morning digest"))

	if r := w.say(bob, "routine edit "+id+" 0 7 * * *"); !strings.Contains(r, "only its owner or an admin") {
		t.Fatalf("bob's edit: %q", r)
	}
	if r := w.say(alice, "routine edit "+id+" */1 * * * *"); !strings.Contains(r, "not changed") {
		t.Fatalf("an edit below the minimum interval: %q", r)
	}
	if n := w.count(core.KindRoutineChanged); n != 0 {
		t.Fatalf("%d routine.changed after refused edits", n)
	}

	r := w.say(alice, "routine edit "+id+" 0 10 * * *")
	if !strings.Contains(r, "changed") || !strings.Contains(r, "`0 10 * * *`") || !strings.Contains(r, "morning digest") {
		t.Fatalf("edit reply: %q", r)
	}
	w.clk.Set(time.Date(2026, 3, 2, 9, 30, 0, 0, time.UTC))
	w.tick()
	if f := w.fired(); len(f) != 0 {
		t.Fatalf("the old 09:00 slot fired after the edit: %+v", f)
	}
	w.clk.Set(time.Date(2026, 3, 2, 10, 5, 0, 0, time.UTC))
	w.tick()
	if f := w.fired(); len(f) != 1 || f[0].Outcome != scheduler.OutcomeFired || !f[0].Slot.Equal(time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)) {
		t.Fatalf("after the edit to 10:00: %+v", f)
	}

	// At 15:00 move it to 12:00: today's 12:00 slot never existed, so it is
	// neither fired late nor reported to the owner as skipped.
	w.clk.Set(time.Date(2026, 3, 2, 15, 0, 0, 0, time.UTC))
	w.say(alice, "routine edit "+id+" 0 12 * * * tz Europe/Paris")
	dmsBefore := len(w.dms(alice.ID))
	w.tick()
	if f := w.fired(); len(f) != 1 {
		t.Fatalf("a slot before the edit was decided: %s %s (%s)", f[1].Outcome, f[1].Slot, f[1].Reason)
	}
	if n := len(w.dms(alice.ID)); n != dmsBefore {
		t.Fatalf("the owner was told about a slot before the edit: %q", w.dms(alice.ID))
	}
	w.clk.Set(time.Date(2026, 3, 3, 11, 5, 0, 0, time.UTC)) // 12:05 in Paris
	w.tick()
	if f := w.fired(); len(f) != 2 || !f[1].Slot.Equal(time.Date(2026, 3, 3, 11, 0, 0, 0, time.UTC)) {
		t.Fatalf("after the edit to 12:00 Paris: %+v", f)
	}

	// Paused stays paused; the instruction changes; drift settles afresh.
	w.say(alice, "routine pause "+id)
	if r := w.say(core.Person{ID: "UADMIN"}, "routine edit "+id+": evening digest, three bullets"); !strings.Contains(r, "still paused") {
		t.Fatalf("admin's edit of a paused routine: %q", r)
	}
	l := w.say(alice, "routines")
	if !strings.Contains(l, "paused") || !strings.Contains(l, "evening digest, three bullets") || !strings.Contains(l, "every day at 12:00 (`0 12 * * *`, Europe/Paris)") || !strings.Contains(l, "settling (0 of") {
		t.Fatalf("list after the edits: %q", l)
	}
	if r := w.say(alice, "routine edit "+id+": evening digest, three bullets"); !strings.Contains(r, "nothing was changed") {
		t.Fatalf("an edit that changes nothing: %q", r)
	}
}
