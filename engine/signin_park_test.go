package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/coretest"
	"github.com/marlowe-bot/marlowe/engine"
	"github.com/marlowe-bot/marlowe/signin"
	"github.com/marlowe-bot/marlowe/vault"
)

// personTool is a tool that acts as each person on "github": it asks the
// sign-in service for the requester's token and, without one, tells the
// harness it needs their sign-in (as a connector in person mode does).
func personTool(name string, c core.Consequence, log *toolLog) func(*signin.Service) []core.Tool {
	return func(svc *signin.Service) []core.Tool {
		return []core.Tool{{Name: name, Description: "acts on github as the requester", Consequence: c, ActsAsRequester: true,
			Schema: json.RawMessage(`{"type":"object","properties":{}}`),
			Run: func(ctx context.Context, tc core.ToolContext, _ json.RawMessage) (core.Observation, error) {
				tok, err := svc.Token(ctx, tc.Scope.Platform, tc.Actor.ID, "github")
				if errors.Is(err, signin.ErrNotConnected) || errors.Is(err, signin.ErrReconnect) {
					log.add("needs:" + tc.Actor.ID)
					return core.Observation{SignIn: "github"}, nil
				}
				if err != nil {
					return core.Observation{}, err
				}
				log.add("as:" + tc.Actor.ID + ":" + tok)
				return core.Observation{Text: "done on github as " + tc.Actor.ID, Trust: core.Trusted}, nil
			}}}
	}
}

func callsTool(name string) *coretest.ScriptedModel {
	return coretest.NewScriptedModel(coretest.Calls(coretest.Call("c1", name, `{}`)),
		func(v core.View) (core.Reply, error) { return core.Reply{Text: "result: " + lastText(v)}, nil })
}

// connect stores a grant for p and reports it as the sign-in service does
// after a completed OAuth callback (that flow is tested in package signin).
func connect(t *testing.T, h *harness, v *vault.Vault, p core.Person) {
	t.Helper()
	c := core.Connection{Platform: platform, Person: p.ID, Server: "github", ConnectedAt: h.clk.Now()}
	if err := v.Put(t.Context(), c, vault.Grant{AccessToken: tokenMark + p.ID}); err != nil {
		t.Fatal(err)
	}
	if err := h.e.ConnectionChanged(t.Context(), platform, core.ConnectionChanged{Person: p.ID, Server: "github", Event: core.ConnConnected, By: p.ID}); err != nil {
		t.Fatal(err)
	}
	h.idle()
}

// A run that needs the requester's sign-in parks with a card in the thread
// naming whose account it waits for; the link goes to the requester alone,
// in their DM; nobody else can settle the card; once they connect, the call
// runs as them and the run finishes.
func TestRunParksForTheRequestersSignInAndResumes(t *testing.T) {
	log := &toolLog{}
	h, _, v := connHarnessWith(t, callsTool("gh_read"), personTool("gh_read", core.Read, log), false)
	ev := h.mention(alice, "C1", "read the repo")
	h.deliver(ev)
	h.idle()
	if got := log.get(); len(got) != 1 || got[0] != "needs:UALICE" {
		t.Fatalf("tool calls: %v", got)
	}
	var run string
	for id, r := range h.runs("C1") {
		run = id
		if r.Status != core.RunWaitingApproval {
			t.Fatalf("status %s, want waiting", r.Status)
		}
	}
	cards := threadCards(h, "C1")
	if len(cards) != 1 || !strings.Contains(cards[0].Out.Card.Title, "Waiting for <@UALICE> to connect github") ||
		!strings.Contains(cardText(cards[0].Out.Card), "<@UALICE>'s own github account") {
		t.Fatalf("thread card: %+v", cards)
	}
	for _, p := range h.s.PostsIn("C1") {
		if strings.Contains(p.Out.Text, "/connect?t=") || strings.Contains(cardText(p.Out.Card), "/connect?t=") {
			t.Fatalf("a sign-in link was posted in the channel: %q", p.Out.Text)
		}
	}
	dm := h.s.PostsIn("D-" + alice.ID)
	if len(dm) == 0 || !strings.Contains(dm[len(dm)-1].Out.Text, "https://marlowe.example/connect?t=") || !strings.Contains(dm[len(dm)-1].Out.Text, "Connect github") {
		t.Fatalf("alice's DM: %+v", dm)
	}
	// Bob cannot settle or cancel it, and connecting himself does nothing for her run.
	h.click(bob, token(cards[0].Out.Card, "decline"), threadOf(ev))
	h.idle()
	connect(t, h, v, bob)
	if got := log.get(); len(got) != 1 || h.runs("C1")[run].Status != core.RunWaitingApproval {
		t.Fatalf("after bob: calls %v, status %s", got, h.runs("C1")[run].Status)
	}
	// She connects: the call runs as her, and the run ends.
	connect(t, h, v, alice)
	if got := log.get(); len(got) != 2 || got[1] != "as:UALICE:"+tokenMark+alice.ID {
		t.Fatalf("after alice connected: %v", got)
	}
	if st := h.runs("C1")[run].Status; st != core.RunDone {
		t.Fatalf("status %s, want done", st)
	}
	if c := current(t, h, cards[0]); !strings.Contains(c.Resolution, "<@UALICE> connected github") {
		t.Errorf("card resolution: %q", c.Resolution)
	}
	h.verify("C1")
}

// An irreversible call approved by someone else still runs as the
// requester, never with the approver's account; the card says so.
func TestApproverNeverLendsTheirAccount(t *testing.T) {
	log := &toolLog{}
	h, _, v := connHarnessWith(t, callsTool("gh_wipe"), personTool("gh_wipe", core.Irreversible, log), false, platformAdmins(bob.ID))
	connect(t, h, v, alice)
	connect(t, h, v, bob)
	ev := h.mention(alice, "C1", "delete the repo")
	h.deliver(ev)
	h.idle()
	cards := threadCards(h, "C1")
	if len(cards) != 1 || !strings.Contains(cardText(cards[0].Out.Card), "<@UALICE>'s own account (approving does not lend yours)") {
		t.Fatalf("card: %+v", cards)
	}
	h.click(bob, token(cards[0].Out.Card, "approve"), threadOf(ev))
	h.idle()
	if got := log.get(); len(got) != 1 || got[0] != "as:UALICE:"+tokenMark+alice.ID {
		t.Fatalf("ran: %v", got)
	}
}

// A routine runs as its owner: not connected, it parks with a card in the
// owner's DM and a link for them, and runs as them once they connect.
func TestRoutineRunsAsItsOwner(t *testing.T) {
	log := &toolLog{}
	h, _, v := connHarnessWith(t, callsTool("gh_read"), personTool("gh_read", core.Read, log), false)
	connect(t, h, v, alice) // someone else's connection is never used
	run, err := h.e.StartUnattended(context.Background(), core.UnattendedRun{Scope: chanScope("C1"), Owner: carol, Instruction: "summarise the repo", Trigger: "routine-1"})
	if err != nil {
		t.Fatal(err)
	}
	h.idle()
	if got := log.get(); len(got) != 1 || got[0] != "needs:UCAROL" {
		t.Fatalf("calls: %v", got)
	}
	if len(dmCards(h, carol)) != 1 {
		t.Fatalf("owner's DM cards: %d", len(dmCards(h, carol)))
	}
	if _, ok := h.s.Find("https://marlowe.example/connect?t="); !ok {
		t.Fatal("no link")
	}
	for _, p := range h.s.Posts() {
		if strings.Contains(p.Out.Text, "/connect?t=") && p.Ref.Scope.Channel != "D-"+carol.ID {
			t.Fatalf("a link went to %s", p.Ref.Scope.Channel)
		}
	}
	connect(t, h, v, carol)
	if got := log.get(); len(got) != 2 || got[1] != "as:UCAROL:"+tokenMark+carol.ID {
		t.Fatalf("after the owner connected: %v", got)
	}
	if st := h.runs("C1")[run].Status; st != core.RunDone {
		t.Fatalf("status %s", st)
	}
}

func cardText(c *core.Card) string {
	if c == nil {
		return ""
	}
	parts := []string{c.Title, c.Body, c.Resolution}
	for _, f := range c.Fields {
		parts = append(parts, f.Label+": "+f.Value)
	}
	return strings.Join(parts, "\n")
}

var _ = engine.Export{}

// A connector with the bot's identity: its card says the call runs with
// the bot's shared credentials.
func TestBotIdentityCardSaysSharedCredentials(t *testing.T) {
	h, _, _ := connectorHarness(t, core.Irreversible, coretest.Call("c1", "github__delete_repo", `{"repo":"acme/api"}`))
	cards := threadCards(h, "C1")
	if len(cards) != 1 || !strings.Contains(cardText(cards[0].Out.Card), "Runs as: the bot's shared github credentials, the same for everyone") {
		t.Fatalf("card: %s", cardText(cards[0].Out.Card))
	}
}

// `connect <server>` sends a fresh link, in the DM only, even when asked
// in a channel; an unknown server is named.
func TestConnectSendsALinkInTheDMOnly(t *testing.T) {
	h, _, _ := connHarness(t)
	if got := h.sayDM(alice, "connect github"); !strings.Contains(got, "https://marlowe.example/connect?t=") {
		t.Fatalf("connect in the DM: %q", got)
	}
	before := len(h.s.PostsIn("D-" + bob.ID))
	if reply := h.say(bob, "connect github"); strings.Contains(reply, "/connect?t=") || !strings.Contains(reply, "direct message") {
		t.Fatalf("connect in a channel answered there: %q", reply)
	}
	dm := h.s.PostsIn("D-" + bob.ID)
	if len(dm) != before+1 || !strings.Contains(dm[len(dm)-1].Out.Text, "/connect?t=") {
		t.Fatalf("bob's DM: %+v", dm)
	}
	for _, p := range h.s.PostsIn("C1") {
		if strings.Contains(p.Out.Text, "/connect?t=") {
			t.Fatalf("a link in the channel: %q", p.Out.Text)
		}
	}
	if got := h.sayDM(alice, "connect nope"); !strings.Contains(got, "can't connect `nope`") {
		t.Fatalf("unknown server: %q", got)
	}
}
