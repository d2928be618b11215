package scheduler_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/coretest"
	"github.com/marlowe-bot/marlowe/replica"
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

// newWorldWith is newWorld (a model answering runs when m is set) with
// the scheduler's configuration adjusted by cfg (when set) and extra tools.
func newWorldWith(t *testing.T, m core.Model, cfg func(*scheduler.Config), extra ...core.Tool) *world {
	t.Helper()
	w := &world{t: t, signer: coretest.NewSigner(t), clk: &clock{t: time.Date(2026, 3, 2, 8, 0, 0, 0, time.UTC)}, model: m, cfg: cfg, tools: extra}
	w.j = coretest.NewMemJournal(w.signer)
	w.s = coretest.NewFakeSurface("test", "UBOT")
	w.start(w.j)
	return w
}

// sayIn delivers a top-level message in sc and returns the bot's reply in
// its thread.
func (w *world) sayIn(sc core.Scope, by core.Person, text string) string {
	w.t.Helper()
	id := fmt.Sprintf("M%04d", w.next.Add(1))
	ev := core.Event{Scope: sc, Visibility: core.Public, MessageID: id, Author: by, Text: text, MentionsBot: true, At: w.clk.Now()}
	if err := w.e.Deliver(context.Background(), core.Inbound{Event: &ev}); err != nil {
		w.t.Fatalf("deliver: %v", err)
	}
	w.idle()
	var out []string
	for _, p := range w.s.Posts() {
		if p.Out.Scope.Channel == sc.Channel && p.Out.Scope.Thread == id {
			out = append(out, p.Out.Text)
		}
	}
	return strings.Join(out, "\n")
}

// Attack (no cap on routines): one person cannot own more than
// MARLOWE_ROUTINE_MAX_PER_OWNER routines, across the channels of their
// platform, nor a channel hold more than MARLOWE_ROUTINE_MAX_PER_CHANNEL;
// the refusal names the cap and journals nothing; a deleted routine frees
// its place.
func TestAttackRoutineCapsPerChannelAndPerOwner(t *testing.T) {
	w := newWorldWith(t, nil, func(c *scheduler.Config) { c.MaxPerChannel, c.MaxPerOwner = 3, 2 })
	other := core.Scope{Platform: "test", Workspace: "W1", Channel: "C2"}
	first := routineID(t, w.say(alice, "routine add @every 1h: one"))
	routineID(t, w.sayIn(other, alice, "routine add @every 1h: two"))
	if r := w.say(alice, "routine add @every 1h: three"); !strings.Contains(r, "MARLOWE_ROUTINE_MAX_PER_OWNER=2") || !strings.Contains(r, "owns 2 routines") {
		t.Fatalf("alice's third routine (one here, one in another channel): %q", r)
	}
	routineID(t, w.say(bob, "routine add @every 1h: bob one"))
	routineID(t, w.say(bob, "routine add @every 1h: bob two"))
	if r := w.say(admin, "routine add @every 1h: admin one"); !strings.Contains(r, "MARLOWE_ROUTINE_MAX_PER_CHANNEL=3") || !strings.Contains(r, "this channel has 3 routines") {
		t.Fatalf("a fourth routine in the channel: %q", r)
	}
	if n := w.count(core.KindRoutineCreated); n != 3 {
		t.Fatalf("%d routine.created in the channel, want 3", n)
	}
	w.say(alice, "routine delete "+first)
	if r := w.say(alice, "routine add @every 1h: three"); !strings.Contains(r, "armed") {
		t.Fatalf("after a delete: %q", r)
	}
}

// Attack (no cap on routines): the model's schedule_routine proposals
// count against the same caps: a proposal past one is refused before any
// card, and journals no routine.
func TestAttackProposalsObeyTheRoutineCaps(t *testing.T) {
	w := newWorldWith(t, proposingModel(`{"spec":"@every 10m","instruction":"summarise"}`), func(c *scheduler.Config) { c.MaxPerChannel = 1 })
	routineID(t, w.say(bob, "routine add @every 1h: bob's"))
	w.say(alice, "every ten minutes, summarise")
	if n := w.count(core.KindRoutineCreated); n != 1 {
		t.Fatalf("%d routine.created, want only bob's", n)
	}
	if c := w.s.Cards(); len(c) != 0 {
		t.Fatalf("a proposal card past the cap: %+v", c[0].Out.Card)
	}
	var refused bool
	for _, c := range w.j.All(room.Key()) {
		if c.Kind() == core.KindToolCompleted {
			if p, _ := core.Decode[*core.ToolCompleted](c); p.Tool == scheduler.ProposeToolName && !p.OK && strings.Contains(p.Error, "MARLOWE_ROUTINE_MAX_PER_CHANNEL=1") {
				refused = true
			}
		}
	}
	if !refused {
		t.Fatal("the proposal's tool result does not name the cap")
	}
}

// Attack (unfenced appends): a routine command's tool call carried out
// again on a replica whose lease on the channel has passed to another (a
// run replayed there after a handover) appends nothing: routine.changed,
// routine.created and a manual routine.fired all carry the drive's fence.
// The replica that holds the lease now appends as before.
func TestAttackDeposedReplicaRoutineCallAppendsNothing(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	id := routineID(t, w.say(alice, "routine add @every 1h: digest"))
	w.say(alice, "routine pause "+id)
	w.say(alice, "routine resume "+id)
	w.say(alice, "routine run "+id)
	w.clk.Advance(time.Hour) // past the cooldown
	lease := core.ChannelLease(room.Key())
	old, ok, err := w.j.Acquire(ctx, lease, "replica-a", time.Minute)
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	if err := w.j.Release(ctx, "replica-a", lease); err != nil {
		t.Fatal(err)
	}
	cur, ok, err := w.j.Acquire(ctx, lease, "replica-b", time.Minute)
	if err != nil || !ok || cur.Token == old.Token {
		t.Fatal(cur, ok, err)
	}
	before := len(w.j.All(room.Key()))
	for _, text := range []string{"routine pause " + id, "routine add @every 1h: digest", "routine run " + id} {
		req := w.routineCall(text)
		p, _ := core.Decode[*core.ToolRequested](req)
		sc := room
		sc.Thread = req.Scope().Thread
		// A fresh origin: what the call would append were it not fenced.
		_, err := w.sch.Tool().Run(replica.WithFence(ctx, &old), core.ToolContext{Run: req.Run(), Scope: sc, CallID: p.Call.ID}, []byte(p.Call.Args))
		if !errors.Is(err, replica.ErrLeaseLost) {
			t.Fatalf("deposed replica's %q: %v", text, err)
		}
	}
	if n := len(w.j.All(room.Key())); n != before {
		t.Fatalf("a deposed replica's routine calls appended %d command(s)", n-before)
	}
	req := w.routineCall("routine pause " + id)
	p, _ := core.Decode[*core.ToolRequested](req)
	sc := room
	sc.Thread = req.Scope().Thread
	if _, err := w.sch.Tool().Run(replica.WithFence(ctx, &cur), core.ToolContext{Run: req.Run(), Scope: sc, CallID: p.Call.ID}, []byte(p.Call.Args)); err != nil {
		t.Fatalf("the lease holder's pause: %v", err)
	}
	if n := len(w.j.All(room.Key())); n != before+1 {
		t.Fatalf("the lease holder's pause appended %d command(s), want 1", n-before)
	}
}

// routineCall is the routine tool.requested whose text is text.
func (w *world) routineCall(text string) core.Command {
	w.t.Helper()
	for _, c := range w.j.All(room.Key()) {
		if c.Kind() == core.KindToolRequested {
			if p, _ := core.Decode[*core.ToolRequested](c); p.Call.Name == "routine" && strings.Contains(p.Call.Args, `"`+text+`"`) {
				return c
			}
		}
	}
	w.t.Fatalf("no routine call for %q", text)
	return core.Command{}
}

// Attack (docs versus code): under `policy set approval +write`, the
// read-only `routines` asks nobody, and a `routine add` whose schedule will
// fail parsing is refused with its reason before any approval card: a
// person is asked only about a call that can run. A valid add still asks.
func TestAttackOnlyRunnableWritesAskForApproval(t *testing.T) {
	w := newWorld(t)
	if r := w.say(admin, "policy set approval +write"); !strings.Contains(strings.ToLower(r), "write") {
		t.Fatalf("policy: %q", r)
	}
	if r := w.say(alice, "routines"); !strings.Contains(r, "No routines in this channel") {
		t.Fatalf("routines under +write: %q", r)
	}
	for _, bad := range []string{"routine add every fortnight: digest", "routine add * * * * *: spam", "routine add @every 1h tz Mars/Olympus: digest"} {
		if r := w.say(alice, bad); r == "" || strings.Contains(r, "armed") {
			t.Fatalf("%q: %q", bad, r)
		}
	}
	if n := w.count(core.KindApprovalRequested); n != 0 {
		t.Fatalf("%d approval card(s) for a read and for adds that cannot parse", n)
	}
	if c := w.s.Cards(); len(c) != 0 {
		t.Fatalf("cards shown: %q", c[0].Out.Card.Title)
	}
	w.say(alice, "routine add @every 1h: digest")
	if n := w.count(core.KindApprovalRequested); n != 1 {
		t.Fatalf("%d approval card(s) for a valid add under +write, want 1", n)
	}
	if n := w.count(core.KindRoutineCreated); n != 0 {
		t.Fatalf("a gated add ran before its approval")
	}
}
