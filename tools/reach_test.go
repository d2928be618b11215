package tools_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/coretest"
)

// readerSurface is a fake surface shaped like Discord: workspaces
// (core.Rooms) where a DM has none, and who can read what
// (core.RoomReader), as the platform would answer.
type readerSurface struct {
	*coretest.FakeSurface
	workspace map[string]string   // channel → workspace ("" for a DM)
	readers   map[string][]string // channel → who can read it
}

func (s readerSurface) ChannelWorkspace(_ context.Context, ch string) (string, error) {
	ws, ok := s.workspace[ch]
	if !ok {
		return "", fmt.Errorf("unknown channel")
	}
	return ws, nil
}

func (s readerSurface) UserInWorkspace(_ context.Context, ws, user string) (bool, error) {
	return ws == "W1", nil
}

func (s readerSurface) CanRead(_ context.Context, ch, user string) (bool, error) {
	return slices.Contains(s.readers[ch], user), nil
}

// askIn delivers text from p in scope and waits for the engine.
func (w *world) askIn(scope core.Scope, p core.Person, text string) {
	w.t.Helper()
	vis := core.Public
	if scope.Workspace == "" {
		vis = core.DM
	}
	ev := core.Event{Scope: scope, Visibility: vis, MessageID: fmt.Sprintf("M%d", time.Now().UnixNano()), Author: p,
		Text: "<@UBOT> " + text, MentionsBot: true, At: time.Now()}
	if err := w.e.Deliver(context.Background(), core.Inbound{Event: &ev}); err != nil {
		w.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := w.e.WaitIdle(ctx); err != nil {
		w.t.Fatal(err)
	}
}

// refusedIn checks that tool was refused in scope's journal, with the
// rule's refusal, naming no room, before any permission was decided.
func (w *world) refusedIn(scope core.Scope, tool string) {
	w.t.Helper()
	var refused string
	for _, c := range w.j.All(scope.Key()) {
		switch c.Kind() {
		case core.KindToolCompleted:
			if p, _ := core.Decode[*core.ToolCompleted](c); p.Tool == tool && !p.OK {
				refused = p.Error
			}
		case core.KindPermissionDecided:
			w.t.Fatalf("the gate was asked about a call into a room the requester cannot read")
		}
	}
	if !strings.Contains(refused, core.ErrUnreachable.Error()) {
		w.t.Fatalf("%s not refused by the reachability rule (result %q)", tool, refused)
	}
	for _, name := range []string{"DBOB", "CPRIV", "salaries"} {
		if strings.Contains(refused, name) {
			w.t.Fatalf("the refusal names the room (%q): %q", name, refused)
		}
	}
	if c := w.s.Cards(); len(c) != 0 {
		w.t.Fatalf("a card for a call into a room the requester cannot read: %q", c[0].Out.Card.Title)
	}
}

// ATTACK (DM to DM): from her DM with the bot, Alice asks it to post into
// Bob's DM with the bot (its id is visible, e.g. on a forwarded card). A
// DM's workspace is empty, and so is every DM's: on the old code they
// looked like one room and the post went to approval, then out. Now it is
// refused before anyone is asked, and nothing reaches Bob's DM.
func TestAttackPostFromADMIntoAnotherDMIsRefused(t *testing.T) {
	wrap := func(s *coretest.FakeSurface) core.Surface {
		return readerSurface{FakeSurface: s, workspace: map[string]string{"DALICE": "", "DBOB": "", "C1": "W1"},
			readers: map[string][]string{"DALICE": {"UALICE"}, "DBOB": {"UBOB"}}}
	}
	w := newWorldOn(t, wrap, call("post_to_channel", `{"channel":"DBOB","text":"hello from Alice"}`), coretest.Text("done"))
	dm := core.Scope{Platform: "test", Channel: "DALICE"}
	w.askIn(dm, alice, "post hello to DBOB")
	w.refusedIn(dm, "post_to_channel")
	if n := len(w.s.PostsIn("DBOB")); n != 0 {
		t.Fatal("posted into another person's DM")
	}
}

// ATTACK (a private channel the requester cannot see): in the same
// workspace, "same workspace" was the whole check, so Alice could post
// into a private channel she is not in. Now the platform's answer (who
// can read it now) decides; a member's post goes out.
func TestAttackPostIntoAPrivateChannelTheRequesterCannotReadIsRefused(t *testing.T) {
	wrap := func(s *coretest.FakeSurface) core.Surface {
		return readerSurface{FakeSurface: s, workspace: map[string]string{"C1": "W1", "CPRIV": "W1"},
			readers: map[string][]string{"C1": {"UALICE", "UBOB"}, "CPRIV": {"UBOB"}}}
	}
	w := newWorldOn(t, wrap, call("post_to_channel", `{"channel":"CPRIV","text":"hello"}`), coretest.Text("done"))
	in := core.Scope{Platform: "test", Workspace: "W1", Channel: "C1"}
	w.askIn(in, alice, "post hello to <#CPRIV>")
	w.refusedIn(in, "post_to_channel")
	if n := len(w.s.PostsIn("CPRIV")); n != 0 {
		t.Fatal("posted into a private channel the requester cannot read")
	}
	bob := core.Person{ID: "UBOB", Name: "Bob"}
	w = newWorldOn(t, wrap, call("post_to_channel", `{"channel":"CPRIV","text":"hello"}`), coretest.Text("done"))
	w.askIn(in, bob, "post hello to <#CPRIV>")
	if n := len(w.s.PostsIn("CPRIV")); n != 1 {
		t.Fatalf("%d posts by a member of the private channel, want 1 (decisions %v)", n, w.decisions())
	}
}

// ATTACK (paging people outside the requester's reach): ask_human puts a
// question in the inboxes (DMs) of the people it names. Someone outside
// the requester's workspace is refused before anyone is asked, as
// dm_person's person is; on the old code the question went to approval.
func TestAttackAskHumanOutsideTheWorkspaceIsRefused(t *testing.T) {
	wrap := func(s *coretest.FakeSurface) core.Surface {
		return roomsSurface{FakeSurface: s, users: map[string]map[string]bool{"W1": {"UALICE": true, "UBOB": true}, "W2": {"UEVE": true}}}
	}
	w := newWorldOn(t, wrap, call("ask_human", `{"question":"approve the budget?","ask":["<@UEVE>"]}`), coretest.Text("done"))
	w.ask(alice, "ask <@UEVE> whether to approve the budget")
	w.refusedBeforeAsking("ask_human", "not in the workspace")
	for _, p := range w.s.Posts() {
		if p.Out.Scope.Channel == "D-UEVE" {
			t.Fatal("the question reached someone outside the requester's workspace")
		}
	}
}

// leavingSurface is readerSurface whose readers change while the engine
// runs (a person removed from a private channel).
type leavingSurface struct {
	*coretest.FakeSurface
	mu      *sync.Mutex
	readers map[string][]string // channel → who can read it
}

func (s leavingSurface) ChannelWorkspace(_ context.Context, ch string) (string, error) {
	return "W1", nil
}

func (s leavingSurface) UserInWorkspace(_ context.Context, ws, user string) (bool, error) {
	return ws == "W1", nil
}

func (s leavingSurface) CanRead(_ context.Context, ch, user string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Contains(s.readers[ch], user), nil
}

func (s leavingSurface) leave(ch, user string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.readers[ch] = slices.DeleteFunc(slices.Clone(s.readers[ch]), func(u string) bool { return u == user })
}

// ATTACK (left while the card waited): Bob, a member of the private
// channel, has the model post there; the channel came from the model, so
// the post waits for approval. Bob is removed from the channel; then the
// card is approved. The rule is asked again when the tool runs, and Bob
// can no longer read the room: nothing is posted. On the old code the
// second check asked the engine's tool surface, which hid the platform's
// RoomReader, so every room passed and the post went out.
func TestAttackPostAfterTheRequesterLeftWhileTheCardWaitedIsRefused(t *testing.T) {
	ls := leavingSurface{mu: &sync.Mutex{}, readers: map[string][]string{"C1": {"UALICE", "UBOB"}, "CPRIV": {"UBOB"}}}
	wrap := func(s *coretest.FakeSurface) core.Surface {
		ls.FakeSurface = s
		return ls
	}
	w := newWorldOn(t, wrap, call("post_to_channel", `{"channel":"CPRIV","text":"hello"}`), coretest.Text("done"))
	ev := w.ask(bob, "post hello to the private room")
	if got := strings.Join(w.decisions(), ","); got != "post_to_channel:ask" {
		t.Fatalf("decisions = %v, want the post to wait for approval", got)
	}
	cards := w.s.Cards()
	if len(cards) != 1 {
		t.Fatalf("cards = %+v", cards)
	}
	ls.leave("CPRIV", "UBOB")
	sc := ev.Scope
	sc.Thread = ev.MessageID
	var approve string
	for _, a := range cards[0].Out.Card.Actions {
		if a.ID == "approve" || strings.EqualFold(a.Label, "approve") {
			approve = a.Token
		}
	}
	if approve == "" {
		t.Fatalf("no approve action on %+v", cards[0].Out.Card.Actions)
	}
	if err := w.e.Deliver(context.Background(), core.Inbound{Click: &core.CardClick{Scope: sc, Token: approve, By: alice}}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := w.e.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(w.s.PostsIn("CPRIV")); n != 0 {
		t.Fatalf("posted into the private channel after the requester left it (%d posts)", n)
	}
	var result string
	for _, c := range w.j.All(ev.Scope.Key()) {
		if c.Kind() == core.KindToolCompleted {
			if p, _ := core.Decode[*core.ToolCompleted](c); p.Tool == "post_to_channel" {
				result = p.Error
			}
		}
	}
	if !strings.Contains(result, core.ErrUnreachable.Error()) || strings.Contains(result, "CPRIV") {
		t.Fatalf("the call's result is %q, want the rule's refusal naming no room", result)
	}
}
