package scheduler_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/scheduler"
)

// staleJournal serves a channel's full read from a snapshot taken earlier:
// a scheduler that folded the journal before another one's catch-up firing
// was journaled (it stalled between its read and its append).
type staleJournal struct {
	core.Journal
	snapshot []core.Command
}

func (j staleJournal) Read(ctx context.Context, ch core.ChannelKey, from uint64, limit int) ([]core.Command, error) {
	if from == 0 && limit <= 0 {
		return j.snapshot, nil
	}
	return j.Journal.Read(ctx, ch, from, limit)
}

// Attack (missed slots pile up): after downtime across five slots of an
// @every 10m routine, one catch-up firing covers the latest, and the four
// earlier ones are journaled skipped (coalesced) under the ids their own
// firings would have had; so a scheduler that read the journal before the
// catch-up (a stalled replica) and decides an earlier slot posts nothing.
// The owner gets no skip report for coalesced slots.
func TestAttackMissedSlotsCoalesceIntoOneCatchUp(t *testing.T) {
	w := newWorld(t)
	id := routineID(t, w.say(alice, "routine add @every 10m: digest"))
	w.restart()
	stale := w.j.All(room.Key())
	w.clk.Set(time.Date(2026, 3, 2, 8, 55, 0, 0, time.UTC)) // slots 08:10 … 08:50 missed
	w.tick()
	f := w.fired()
	if len(f) != 5 {
		t.Fatalf("%d routine.fired after missing 5 slots, want 4 coalesced and 1 catch-up: %+v", len(f), f)
	}
	for i, p := range f[:4] {
		want := time.Date(2026, 3, 2, 8, 10*(i+1), 0, 0, time.UTC)
		if p.Outcome != scheduler.OutcomeSkipped || !p.Coalesced || !p.Slot.Equal(want) || !strings.Contains(p.Reason, "coalesced") {
			t.Fatalf("earlier slot %d: %+v", i, p)
		}
	}
	if c := f[4]; c.Outcome != scheduler.OutcomeFired || c.Missed != 4 || !c.Slot.Equal(time.Date(2026, 3, 2, 8, 50, 0, 0, time.UTC)) {
		t.Fatalf("catch-up: %+v", c)
	}
	if d := w.digests(); len(d) != 1 || !strings.Contains(d[0], "4 earlier slot(s) were missed") {
		t.Fatalf("digests: %q", d)
	}

	// A stalled scheduler, whose read predates the catch-up, decides 08:40.
	clk := func() time.Time { return time.Date(2026, 3, 2, 8, 41, 0, 0, time.UTC) }
	b, err := scheduler.New(scheduler.Config{Journal: staleJournal{w.j, stale}, Boundary: core.NewBoundary(clk), Clock: clk,
		MinInterval: 5 * time.Minute, Grace: time.Hour, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	b.Bind(w.e)
	if err := b.Tick(context.Background()); err != nil {
		t.Fatalf("stalled scheduler's pass: %v", err)
	}
	if d := w.digests(); len(d) != 1 {
		t.Fatalf("a stalled scheduler fired a coalesced slot again: %d digests %q", len(d), d)
	}
	if n := len(w.fired()); n != 5 {
		t.Fatalf("%d routine.fired after the stalled pass", n)
	}
	w.tick()
	if dm := w.dms(alice.ID); len(dm) != 0 {
		t.Fatalf("coalesced slots reported to the owner: %q", dm)
	}
	if l := w.say(alice, "routines"); !strings.Contains(l, id) || !strings.Contains(l, "last fired") {
		t.Fatalf("list: %q", l)
	}
}
