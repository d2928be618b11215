package scheduler_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/coretest"
	"github.com/marlowe-bot/marlowe/scheduler"
)

// readers is a fake surface that says who can read the room now.
type readers struct {
	*coretest.FakeSurface
	mu  sync.Mutex
	can map[string]bool
}

func (r *readers) CanRead(_ context.Context, ch, user string) (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return ch == room.Channel && r.can[user], nil
}

func (r *readers) set(user string, can bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.can[user] = can
}

// ATTACK (a routine outlives its owner's access): Alice adds a routine in
// a private room, then is removed from it. A routine posts for its owner,
// so under the reachability rule its slots are skipped (and she is told)
// while she cannot read the room, and fire again once she can. On the old
// code the routine kept posting there in her name.
func TestRoutineSkipsWhileItsOwnerCannotReadItsRoom(t *testing.T) {
	r := &readers{can: map[string]bool{alice.ID: true}}
	w := &world{t: t, signer: coretest.NewSigner(t), clk: &clock{t: time.Date(2026, 3, 2, 8, 0, 0, 0, time.UTC)},
		wrap: func(s *coretest.FakeSurface) core.Surface { r.FakeSurface = s; return r }}
	w.j = coretest.NewMemJournal(w.signer)
	w.s = coretest.NewFakeSurface("test", "UBOT")
	w.start(w.j)
	id := routineID(t, w.say(alice, "routine add @every 10m: summarise"))

	r.set(alice.ID, false) // removed from the room
	w.clk.Advance(10 * time.Minute)
	w.tick()
	w.idle()
	f := w.fired()
	if len(f) != 1 || f[0].Outcome != scheduler.OutcomeSkipped || !strings.Contains(f[0].Reason, "owner cannot read this channel") {
		t.Fatalf("fired while the owner cannot read the room: %+v", f)
	}
	if d := w.digests(); len(d) != 0 {
		t.Fatalf("posted in the room for an owner who cannot read it: %q", d)
	}
	if dm := w.dms(alice.ID); len(dm) != 1 || !strings.Contains(dm[0], "Routine "+id+" skipped") {
		t.Fatalf("owner's DM: %q", dm)
	}

	r.set(alice.ID, true) // back in the room
	w.clk.Advance(10 * time.Minute)
	w.tick()
	w.idle()
	if f := w.fired(); len(f) != 2 || f[1].Outcome != scheduler.OutcomeFired {
		t.Fatalf("not fired once the owner can read the room again: %+v", f)
	}
	if d := w.digests(); len(d) != 1 {
		t.Fatalf("digests: %q", d)
	}
}
