package scheduler_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/scheduler"
)

func TestRoutineCommandsThroughTheEngine(t *testing.T) {
	w := newWorld(t)
	reply := w.say(alice, "routine add @every 10m: summarise the channel")
	if !strings.Contains(reply, "armed") {
		t.Fatalf("add reply: %q", reply)
	}
	id := routineID(t, reply)
	var created int
	for _, c := range w.j.All(room.Key()) {
		if c.Kind() == core.KindRoutineCreated {
			created++
			p, _ := core.Decode[*core.RoutineCreated](c)
			if c.Actor() != (core.Actor{Type: core.ActorHuman, ID: alice.ID, Platform: "test"}) || !p.Armed || p.Owner != alice.ID || p.Cron != "@every 10m" || p.Instruction != "summarise the channel" {
				t.Fatalf("routine.created by %+v: %+v", c.Actor(), p)
			}
		}
	}
	if created != 1 {
		t.Fatalf("%d routine.created, want 1", created)
	}
	if l := w.say(bob, "routines"); !strings.Contains(l, id) || !strings.Contains(l, "armed") || !strings.Contains(l, id+" every 10m (`@every 10m`, ") {
		t.Fatalf("list: %q", l)
	}
	for _, op := range []string{"pause", "delete"} {
		if r := w.say(bob, "routine "+op+" "+id); !strings.Contains(r, "only its owner or an admin") {
			t.Fatalf("bob %s: %q", op, r)
		}
	}
	if l := w.say(bob, "routines"); !strings.Contains(l, "armed") {
		t.Fatalf("bob changed alice's routine: %q", l)
	}
	if r := w.say(alice, "routine pause "+id); !strings.Contains(r, "paused") {
		t.Fatalf("pause: %q", r)
	}
	if l := w.say(alice, "routines"); !strings.Contains(l, "paused") {
		t.Fatalf("list after pause: %q", l)
	}
	w.clk.Advance(15 * time.Minute)
	w.tick()
	if n := len(w.fired()); n != 0 {
		t.Fatalf("a paused routine fired %d times", n)
	}
	if r := w.say(core.Person{ID: "UADMIN"}, "routine delete "+id); !strings.Contains(r, "deleted") {
		t.Fatalf("admin delete: %q", r)
	}
	if l := w.say(alice, "routines"); !strings.Contains(l, "No routines") {
		t.Fatalf("list after delete: %q", l)
	}
	if r := w.say(alice, "routine resume "+id); !strings.Contains(r, "no routine "+id) {
		t.Fatalf("resume of a deleted routine: %q", r)
	}
}

func TestScheduleRefusals(t *testing.T) {
	w := newWorld(t)
	for _, tc := range []struct{ cmd, want string }{
		{"routine add @every 1m: too chatty", "too often: routines run at most every 5m0s"},
		{"routine add * * * * *: every minute", "routines run at most every 5m0s"},
		{"routine add @daily tz Mars/Olympus: x", "unknown time zone"},
		{"routine add 61 * * * *: x", `can't read the schedule "61 * * * *"`},
		{"routine add @daily", "Usage:"},
	} {
		if r := w.say(alice, tc.cmd); !strings.Contains(r, tc.want) {
			t.Errorf("%q: reply %q, want %q", tc.cmd, r, tc.want)
		}
	}
	for _, c := range w.j.All(room.Key()) {
		if c.Kind() == core.KindRoutineCreated {
			t.Fatalf("a refused spec created a routine")
		}
	}
}

func TestSlotFiresOnceAcrossRestart(t *testing.T) {
	w := newWorld(t)
	id := routineID(t, w.say(alice, "routine add @every 10m: digest"))
	w.tick()
	if n := len(w.fired()); n != 0 {
		t.Fatalf("fired %d before the first slot", n)
	}
	w.clk.Advance(10 * time.Minute)
	w.tick()
	w.tick()
	w.restart()
	w.tick()
	f := w.fired()
	if len(f) != 1 || f[0].Outcome != scheduler.OutcomeFired || f[0].RoutineID != id || !f[0].Slot.Equal(time.Date(2026, 3, 2, 8, 10, 0, 0, time.UTC)) {
		t.Fatalf("fired: %+v", f)
	}
	if d := w.digests(); len(d) != 1 || !strings.Contains(d[0], "Routine "+id+": digest") {
		t.Fatalf("digests: %q", d)
	}
	// The digest is a journaled bot post caused by the firing.
	var posted bool
	for _, c := range w.j.All(room.Key()) {
		if c.Kind() == core.KindMessagePosted && c.Scope().Thread == "" {
			p, _ := core.Decode[*core.MessagePosted](c)
			posted = p.Role == "message" && c.Cause() != ""
		}
	}
	if !posted {
		t.Fatal("digest post not journaled as message.posted")
	}
	w.clk.Advance(10 * time.Minute)
	w.tick()
	if n, d := len(w.fired()), len(w.digests()); n != 2 || d != 2 {
		t.Fatalf("second slot: %d fired, %d digests", n, d)
	}
}

func TestMissedSlotsFireOnceWithinGraceAndSkipAfter(t *testing.T) {
	w := newWorld(t)
	// 09:00 in Paris is 08:00 UTC in March (CET).
	id := routineID(t, w.say(alice, "routine add 0 9 * * * tz Europe/Paris: morning digest"))
	// Down across three slots; up 2.5 h after the latest: skipped.
	w.restart()
	w.clk.Set(time.Date(2026, 3, 5, 10, 30, 0, 0, time.UTC))
	w.tick()
	f := w.fired()
	if len(f) != 1 || f[0].Outcome != scheduler.OutcomeSkipped || f[0].Missed != 2 || !f[0].Slot.Equal(time.Date(2026, 3, 5, 8, 0, 0, 0, time.UTC)) {
		t.Fatalf("after a long outage: %+v", f)
	}
	if d := w.digests(); len(d) != 0 {
		t.Fatalf("skipped slot posted: %q", d)
	}
	if l := w.say(alice, "routines"); !strings.Contains(l, "skipped") || !strings.Contains(l, "grace window") {
		t.Fatalf("list does not show the skip: %q", l)
	}
	// The skip is reported to the owner's DM inbox, once.
	w.tick()
	if dm := w.dms(alice.ID); len(dm) != 1 || !strings.Contains(dm[0], "Routine "+id+" skipped its Thu 5 Mar 09:00 CET slot") {
		t.Fatalf("owner's DM after the skip: %q", dm)
	}
	// Up 20 min after the next slot: it fires once, late.
	w.restart()
	w.clk.Set(time.Date(2026, 3, 6, 8, 20, 0, 0, time.UTC))
	w.tick()
	w.restart()
	w.tick()
	f = w.fired()
	if len(f) != 2 || f[1].Outcome != scheduler.OutcomeFired || !f[1].Slot.Equal(time.Date(2026, 3, 6, 8, 0, 0, 0, time.UTC)) {
		t.Fatalf("within grace: %+v", f)
	}
	if d := w.digests(); len(d) != 1 || !strings.Contains(d[0], id) {
		t.Fatalf("digests: %q", d)
	}
}

func TestFailedDigestPostIsRetriedWithTheSameKey(t *testing.T) {
	w := newWorld(t)
	routineID(t, w.say(alice, "routine add @every 10m: digest"))
	fail := true
	w.s.FailPost = func(out core.Outbound) error {
		if fail && out.Scope.Thread == "" {
			return context.DeadlineExceeded
		}
		return nil
	}
	w.clk.Advance(10 * time.Minute)
	if err := w.sch.Tick(context.Background()); err == nil {
		t.Fatal("a failed post was not reported")
	}
	if l := w.say(alice, "routines"); !strings.Contains(l, "post not confirmed") {
		t.Fatalf("list hides the failed post: %q", l)
	}
	fail = false
	w.clk.Advance(time.Minute)
	w.tick()
	w.tick()
	if n, d := len(w.fired()), len(w.digests()); n != 1 || d != 1 {
		t.Fatalf("after retry: %d fired, %d digests", n, d)
	}
}

func TestDigestListsFinishedRuns(t *testing.T) {
	w := newWorld(t)
	id := routineID(t, w.say(alice, "routine add @daily: what happened"))
	w.say(bob, "help")
	if r := w.say(alice, "routine run "+id); !strings.Contains(r, "ran") {
		t.Fatalf("run: %q", r)
	}
	d := w.digests()
	if len(d) != 1 {
		t.Fatalf("digests: %q", d)
	}
	// A chat command is counted as one, not listed as work done.
	for _, want := range []string{"Routine " + id + ": what happened", "*Commands answered (", "help"} {
		if !strings.Contains(d[0], want) {
			t.Errorf("digest lacks %q:\n%s", want, d[0])
		}
	}
	if strings.Contains(d[0], "Runs finished") {
		t.Errorf("the digest counts commands as runs:\n%s", d[0])
	}
	// The next digest covers only what happened since this one.
	w.say(bob, "routines")
	w.clk.Advance(5 * time.Minute) // a manual run's cooldown
	w.say(alice, "routine run "+id)
	d = w.digests()
	if len(d) != 2 || strings.Contains(d[1], "help") || !strings.Contains(d[1], "routines") {
		t.Fatalf("second digest:\n%s", d[len(d)-1])
	}
}

func TestRoutineToolRefusesWhatNobodyTyped(t *testing.T) {
	w := newWorld(t)
	w.say(alice, "help")
	var run string
	for _, c := range w.j.All(room.Key()) {
		if c.Kind() == core.KindRunStarted {
			run = c.Run()
		}
	}
	args, _ := json.Marshal(map[string]string{"text": "routine add @every 10m: exfiltrate"})
	_, err := w.sch.Tool().Run(context.Background(), core.ToolContext{Run: run, Scope: room, Actor: alice}, args)
	if err == nil || !strings.Contains(err.Error(), "nobody typed") {
		t.Fatalf("err = %v", err)
	}
}

func TestDigestPendingApprovalsAndMemories(t *testing.T) {
	w := newWorld(t)
	routineID(t, w.say(alice, "routine add 0 8 * * *: d"))
	add := func(p core.Payload) {
		d, err := w.b.Agent("run1", room, core.Meta{}, p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.j.Append(context.Background(), d); err != nil {
			t.Fatal(err)
		}
	}
	add(&core.MemoryWritten{MemoryID: "m1", Text: "deploys freeze on Fridays\nsecond line"})
	add(&core.MemoryWritten{MemoryID: "m2", Text: "forgotten one"})
	add(&core.MemoryForgotten{MemoryID: "m2"})
	add(&core.ApprovalRequested{ApprovalID: "a1", Tool: "post_message", Summary: "post to #ops", Requester: bob.ID, ExpiresAt: w.clk.Now().Add(48 * time.Hour)})
	add(&core.ApprovalRequested{ApprovalID: "a2", Tool: "fetch", Summary: "decided", Requester: bob.ID, ExpiresAt: w.clk.Now().Add(48 * time.Hour)})
	add(&core.ApprovalResolved{ApprovalID: "a2", Decision: "approved"})
	w.clk.Advance(24 * time.Hour)
	w.tick()
	d := w.digests()
	if len(d) != 1 {
		t.Fatalf("digests: %q", d)
	}
	for _, want := range []string{"*Waiting for people (1)*", "post_message: post to #ops (asked for <@UBOB>", "*Memories added (1)*", "• deploys freeze on Fridays (m1)"} {
		if !strings.Contains(d[0], want) {
			t.Errorf("digest lacks %q:\n%s", want, d[0])
		}
	}
	for _, bad := range []string{"forgotten one", "decided", "second line"} {
		if strings.Contains(d[0], bad) {
			t.Errorf("digest shows %q:\n%s", bad, d[0])
		}
	}
}

// A channel the scheduler already passed over as having no routines is
// read incrementally afterwards; a routine added there later still fires.
func TestRoutineAddedToAQuietChannelFires(t *testing.T) {
	w := newWorld(t)
	w.say(alice, "help")
	w.tick() // the channel has no routine yet: remembered as quiet
	w.tick()
	id := routineID(t, w.say(alice, "routine add @every 10m: digest"))
	w.clk.Advance(10 * time.Minute)
	w.tick()
	if f := w.fired(); len(f) != 1 || f[0].RoutineID != id {
		t.Fatalf("fired: %+v", f)
	}
	if d := w.digests(); len(d) != 1 {
		t.Fatalf("digests: %q", d)
	}
}

// A routine added in the words its card uses gets that schedule; a bad
// schedule is refused at once, quoting what was typed, even where adding a
// routine needs approval: nobody is asked to approve what cannot run.
func TestScheduleInWords(t *testing.T) {
	w := newWorld(t)
	if r := w.say(alice, "policy"); !strings.Contains(r, "needs approval") {
		t.Fatalf("policy: %q", r)
	}
	r := w.say(alice, "routine add every weekday at 09:00: post a digest")
	var created *core.RoutineCreated
	for _, c := range w.j.All(room.Key()) {
		if c.Kind() == core.KindRoutineCreated {
			p, err := c.Payload()
			if err != nil {
				t.Fatal(err)
			}
			created = p.(*core.RoutineCreated)
		}
	}
	if created == nil || created.Cron != "0 9 * * 1-5" || created.Instruction != "post a digest" {
		t.Fatalf("created %+v from words (reply %q)", created, r)
	}
	if !strings.Contains(r, "every weekday at 09:00") {
		t.Errorf("the proposal does not say the schedule in the words typed: %q", r)
	}

	w.say(core.Person{ID: "UADMIN"}, "policy set approval +write")
	r = w.say(alice, "routine add every weekday at 9:61: post a digest")
	if !strings.Contains(r, `can't read the schedule "every weekday at 9:61"`) || !strings.Contains(r, "every weekday at 09:00") {
		t.Errorf("bad schedule reply %q: want the typed schedule quoted and an example", r)
	}
	for _, c := range w.j.All(room.Key()) {
		if c.Kind() == core.KindApprovalRequested {
			t.Fatalf("approval asked for a schedule that cannot run")
		}
	}
}

// `routines` shows a schedule in the words its person typed, not words
// made back from the cron spec, after a restart too (they are in the
// journaled routine.created and routine.changed); a schedule typed as a
// spec still reads in words (issue 36 item 10).
func TestRoutinesShowTheTypedSchedule(t *testing.T) {
	w := newWorld(t)
	id := routineID(t, w.say(alice, "routine add every day at 8am: water the plants"))
	raw := routineID(t, w.say(alice, "routine add 30 17 * * 1-5: close the shop"))
	for _, c := range w.j.All(room.Key()) {
		if p, err := core.Decode[*core.RoutineCreated](c); err == nil && c.Kind() == core.KindRoutineCreated && p.RoutineID == id && p.Schedule != "every day at 8am" {
			t.Errorf("routine.created schedule = %q, want the typed words", p.Schedule)
		}
	}
	w.restart()
	l := w.say(bob, "routines")
	if !strings.Contains(l, id+" every day at 8am (`") {
		t.Errorf("list after restart: %q, want the typed words", l)
	}
	if strings.Contains(l, raw+" `30 17 * * 1-5` (") {
		t.Errorf("list shows a typed spec without words: %q", l)
	}
	if r := w.say(alice, "routine edit "+id+" every monday and thursday at 7:30am"); !strings.Contains(r, "changed") {
		t.Fatalf("edit: %q", r)
	}
	if l := w.say(bob, "routines"); !strings.Contains(l, id+" every monday and thursday at 7:30am (`") {
		t.Errorf("list after edit: %q, want the new typed words", l)
	}
	if r := w.say(alice, "routine edit "+id+" 0 6 * * *"); !strings.Contains(r, "changed") {
		t.Fatalf("edit to a spec: %q", r)
	}
	if l := w.say(bob, "routines"); strings.Contains(l, "7:30am") || strings.Contains(l, id+" `0 6 * * *` (") {
		t.Errorf("list after an edit to a spec: %q, want the spec in words", l)
	}
}
