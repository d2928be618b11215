package scheduler_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/coretest"
	"github.com/marlowe-bot/marlowe/core/fold"
	"github.com/marlowe-bot/marlowe/scheduler"
)

// proposingModel answers a person's message by calling schedule_routine
// with args, then says it proposed it; a routine's unattended firing gets
// "digest for the team".
func proposingModel(args string) *coretest.ScriptedModel {
	unattended := func(v core.View) bool {
		return len(v.Messages) > 0 && strings.HasPrefix(v.Messages[0].Text, "Scheduled task (unattended")
	}
	return coretest.NewScriptedModel(
		func(v core.View) (core.Reply, error) {
			if unattended(v) {
				return core.Reply{Text: "digest for the team"}, nil
			}
			return core.Reply{ToolCalls: []core.ToolCall{coretest.Call("c1", scheduler.ProposeToolName, args)}}, nil
		},
		func(core.View) (core.Reply, error) {
			return core.Reply{Text: "I proposed it; click Arm to start it."}, nil
		},
	)
}

// proposal is the routine proposed in the room and the card showing it.
func (w *world) proposal() (*core.RoutineCreated, core.Command, coretest.Post) {
	w.t.Helper()
	var p *core.RoutineCreated
	var cmd core.Command
	for _, c := range w.j.All(room.Key()) {
		if c.Kind() == core.KindRoutineCreated {
			x, err := core.Decode[*core.RoutineCreated](c)
			if err != nil {
				w.t.Fatal(err)
			}
			p, cmd = x, c
		}
	}
	if p == nil {
		w.t.Fatal("no routine.created journaled")
	}
	for _, c := range w.s.Cards() {
		if strings.Contains(c.Out.Card.Title, "Proposed routine "+p.RoutineID) {
			return p, cmd, c
		}
	}
	w.t.Fatalf("no proposal card for %s among %d cards", p.RoutineID, len(w.s.Cards()))
	return nil, core.Command{}, coretest.Post{}
}

func (w *world) click(card coretest.Post, action string, by core.Person) {
	w.t.Helper()
	tok := ""
	for _, a := range card.Out.Card.Actions {
		if a.ID == action {
			tok = a.Token
		}
	}
	if tok == "" {
		w.t.Fatalf("card has no %s button: %+v", action, card.Out.Card.Actions)
	}
	w.clickToken(card, tok, by)
}

func (w *world) clickToken(card coretest.Post, tok string, by core.Person) {
	w.t.Helper()
	c := core.CardClick{Scope: card.Out.Scope, Card: card.Out.Card.ID, Token: tok, By: by, At: w.clk.Now()}
	if err := w.e.Deliver(context.Background(), core.Inbound{Click: &c}); err != nil {
		w.t.Fatalf("deliver click: %v", err)
	}
	w.idle()
}

// whispers are the ephemeral replies user got.
func (w *world) whispers(user string) []string {
	var out []string
	for _, x := range w.s.Whispers() {
		if x.User == user {
			out = append(out, x.Text)
		}
	}
	return out
}

func (w *world) changes() int { return w.count(core.KindRoutineChanged) }

func TestProposedRoutineStaysDisarmedUntilItsRequesterClicksArm(t *testing.T) {
	w := newModelWorld(t, proposingModel(`{"spec":"0 9 * * 1-5","tz":"Europe/Paris","instruction":"summarise yesterday's open tickets"}`))
	// Monday 2 March 2026, 08:00 UTC = 09:00 in Paris.
	w.say(alice, "every weekday morning, summarise yesterday's open tickets")

	p, created, card := w.proposal()
	if p.Armed || p.Owner != alice.ID || created.Actor().Type != core.ActorAgent {
		t.Fatalf("proposal journaled as %+v by %+v: want disarmed, owned by the requester, by the run", p, created.Actor())
	}
	if card.Out.Scope.Channel != room.Channel || card.Out.Scope.Thread == "" {
		t.Fatalf("card shown at %+v, want the requester's thread", card.Out.Scope)
	}
	text := card.Out.Card.Title + "\n" + card.Out.Card.Body
	for _, f := range card.Out.Card.Fields {
		text += "\n" + f.Label + ": " + f.Value
	}
	for _, want := range []string{"every weekday at 09:00", "Europe/Paris", "summarise yesterday's open tickets",
		"Tue 3 Mar 2026 09:00 CET", "Wed 4 Mar 2026 09:00 CET", "Thu 5 Mar 2026 09:00 CET", "<@" + alice.ID + ">"} {
		if !strings.Contains(text, want) {
			t.Fatalf("card lacks %q:\n%s", want, text)
		}
	}
	if r := w.say(alice, "routines"); !strings.Contains(r, p.RoutineID) || !strings.Contains(r, "paused") {
		t.Fatalf("routines lists %q; want %s, not armed", r, p.RoutineID)
	}

	// Disarmed: three weekday slots pass and nothing fires.
	for range 3 {
		w.clk.Advance(24 * time.Hour)
		w.tick()
		w.idle()
	}
	if f := w.fired(); len(f) != 0 {
		t.Fatalf("a disarmed proposal fired: %+v", f)
	}

	// A bystander's click is refused, to them alone, and changes nothing.
	w.click(card, "arm", bob)
	if ws := w.whispers(bob.ID); len(ws) != 1 || !strings.Contains(ws[0], "only <@"+alice.ID+">") || !strings.Contains(ws[0], "disarmed") {
		t.Fatalf("bystander was told %q", ws)
	}
	w.click(card, "discard", bob)
	// A forged token (the arm token re-pointed at the discard action) is refused.
	arm := card.Out.Card.Actions[0].Token
	i := strings.LastIndexByte(arm, '.')
	w.clickToken(card, arm[:i+1]+"X"+arm[i+2:], alice)
	if ws := w.whispers(alice.ID); len(ws) != 1 || !strings.Contains(ws[0], "could not be verified") {
		t.Fatalf("forged token answer %q", ws)
	}
	if n := w.changes(); n != 0 {
		t.Fatalf("%d routine.changed after refused clicks", n)
	}
	w.clk.Advance(24 * time.Hour) // Friday 08:00 UTC: the Thursday slot passed too
	w.tick()
	if f := w.fired(); len(f) != 0 {
		t.Fatalf("fired after a bystander's click: %+v", f)
	}

	// The requester's click arms it, as them; slots before it never fire.
	w.click(card, "arm", alice)
	var ch core.Command
	for _, c := range w.j.All(room.Key()) {
		if c.Kind() == core.KindRoutineChanged {
			ch = c
		}
	}
	if pc, err := core.Decode[*core.RoutineChanged](ch); err != nil || !pc.Armed || ch.Actor().Type != core.ActorHuman || ch.Actor().ID != alice.ID {
		t.Fatalf("arm journaled as %+v by %+v", pc, ch.Actor())
	}
	if _, ok := w.s.Find("armed by <@" + alice.ID + ">"); !ok {
		t.Fatal("no confirmation that the routine was armed")
	}
	w.cardDecided(card, "Armed by <@"+alice.ID+">")
	w.tick()
	if f := w.fired(); len(f) != 0 {
		t.Fatalf("arming fired a slot from before it was armed: %+v", f)
	}
	w.clk.Set(time.Date(2026, 3, 9, 8, 0, 30, 0, time.UTC)) // the next weekday slot: Monday 09:00:30 Paris
	w.tick()
	w.idle()
	if f := w.fired(); len(f) != 1 || f[0].Outcome != scheduler.OutcomeFired || !f[0].Slot.Equal(time.Date(2026, 3, 9, 8, 0, 0, 0, time.UTC)) {
		t.Fatalf("after arming: %+v", f)
	}
	if d := w.digests(); len(d) != 1 || d[0] != "digest for the team" {
		t.Fatalf("digests %q", d)
	}

	// A replayed click says it is already armed and changes nothing.
	w.click(card, "arm", alice)
	w.click(card, "discard", alice)
	if ws := w.whispers(alice.ID); len(ws) != 3 || !strings.Contains(ws[1], "already armed") || !strings.Contains(ws[2], "already armed") {
		t.Fatalf("replayed clicks told %q", ws)
	}
	if n := w.changes(); n != 1 {
		t.Fatalf("%d routine.changed after replayed clicks, want 1", n)
	}
	w.cardDecided(card, "Armed by <@"+alice.ID+">") // still one edit
}

// cardDecided checks the proposal card was edited in place, once, to show
// the decision instead of its buttons.
func (w *world) cardDecided(card coretest.Post, want string) {
	w.t.Helper()
	cur, ok := w.s.Current(card.Ref.ID)
	if !ok || cur.Card == nil || len(cur.Card.Actions) != 0 || !strings.Contains(cur.Card.Resolution, want) {
		w.t.Fatalf("the proposal card now shows %+v, want no buttons and %q", cur.Card, want)
	}
	n := 0
	for _, e := range w.s.Edits() {
		if e.Ref.ID == card.Ref.ID {
			n++
		}
	}
	if n != 1 {
		w.t.Fatalf("the proposal card was edited %d times, want 1", n)
	}
}

func TestProposedRoutineDiscardedByItsRequesterNeverFires(t *testing.T) {
	w := newModelWorld(t, proposingModel(`{"spec":"@every 10m","instruction":"ping the build"}`))
	w.say(alice, "keep an eye on the build")
	p, _, card := w.proposal()
	if !strings.Contains(card.Out.Card.Title, "every 10m") || !strings.Contains(card.Out.Card.Fields[1].Label, "UTC") {
		t.Fatalf("card %+v", card.Out.Card)
	}
	w.click(card, "discard", alice)
	w.click(card, "arm", alice)
	if ws := w.whispers(alice.ID); len(ws) != 1 || !strings.Contains(ws[0], "already discarded") {
		t.Fatalf("arm after discard told %q", ws)
	}
	w.cardDecided(card, "Discarded by <@"+alice.ID+">")
	for range 3 {
		w.clk.Advance(10 * time.Minute)
		w.tick()
	}
	if f := w.fired(); len(f) != 0 {
		t.Fatalf("discarded proposal %s fired: %+v", p.RoutineID, f)
	}
}

func TestProposalRefusesSpecsTheGrammarRefuses(t *testing.T) {
	w := newModelWorld(t, proposingModel(`{"spec":"* * * * *","instruction":"spam"}`))
	w.say(alice, "post every minute")
	if n := w.count(core.KindRoutineCreated); n != 0 {
		t.Fatalf("%d routines created from a too-frequent spec", n)
	}
}

// A routine journaled by a run with armed: true (a tool that forgot the
// rule) is still a disarmed proposal: only a person's command arms one.
func TestRoutineArmedByARunNeverFires(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	for _, p := range []core.Payload{
		&core.RoutineCreated{RoutineID: "rrogue", Cron: "@every 10m", TZ: "UTC", Instruction: "exfiltrate", Owner: alice.ID, Armed: true},
		&core.RoutineChanged{RoutineID: "rrogue", Armed: true},
	} {
		d, err := w.b.Agent("run-1", room, core.Meta{}, p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.j.Append(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	rs, err := fold.Routines(room.Key(), w.j.All(room.Key()))
	if err != nil {
		t.Fatal(err)
	}
	if r := rs["rrogue"]; r == nil || r.Armed {
		t.Fatalf("core fold: %+v", r)
	}
	for range 3 {
		w.clk.Advance(10 * time.Minute)
		w.tick()
	}
	if f := w.fired(); len(f) != 0 {
		t.Fatalf("a routine armed by a run fired: %+v", f)
	}
}
