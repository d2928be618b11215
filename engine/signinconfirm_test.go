package engine_test

import (
	"strings"
	"testing"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/vault"
)

// signedIn is what the sign-in service does after an OAuth callback for
// p's link, whoever's account it was (the HTTP flow is tested in package
// signin and in cmd/bot): a pending grant, and the event.
func signedIn(t *testing.T, h *harness, v *vault.Vault, p core.Person, id, account string) {
	t.Helper()
	c := core.Connection{Platform: platform, Person: p.ID, Server: "github", ConnectedAt: h.clk.Now()}
	if err := v.PutPending(t.Context(), c, id, vault.Grant{AccessToken: tokenMark + account, Account: account}); err != nil {
		t.Fatal(err)
	}
	if err := h.e.ConnectionChanged(t.Context(), platform, core.ConnectionChanged{Person: p.ID, Server: "github",
		Event: core.ConnPending, Pending: id, Account: account}); err != nil {
		t.Fatal(err)
	}
	h.idle()
}

func confirmCard(t *testing.T, h *harness, p core.Person, account string) *core.Card {
	t.Helper()
	var found *core.Card
	for _, c := range dmCards(h, p) {
		if strings.Contains(cardText(c.Out.Card), "was it you?") && strings.Contains(cardText(c.Out.Card), account) {
			found = c.Out.Card
		}
	}
	if found == nil {
		t.Fatalf("no confirmation card naming %s in %s's DM: %+v", account, p.ID, dmCards(h, p))
	}
	return found
}

// Attack: Bob got Alice's sign-in link and signed in with his own account.
// Alice's parked run must not resume and must not act as Bob: Alice is
// asked, in her DM, on a card naming Bob's account, that only she can
// press. Bob pressing it changes nothing; Alice rejects it; her own
// sign-in, confirmed by her, resumes the run as her.
func TestSignInByAnotherPersonNeedsTheRequestersConfirmation(t *testing.T) {
	log := &toolLog{}
	h, svc, v := connHarnessWith(t, callsTool("gh_read"), personTool("gh_read", core.Read, log), false)
	ev := h.mention(alice, "C1", "read the repo")
	h.deliver(ev)
	h.idle()
	var run string
	for id := range h.runs("C1") {
		run = id
	}
	waiting := func(when string) {
		t.Helper()
		if got := log.get(); len(got) != 1 || h.runs("C1")[run].Status != core.RunWaitingApproval {
			t.Fatalf("%s: calls %v, status %s", when, got, h.runs("C1")[run].Status)
		}
		if cs, _ := svc.List(t.Context(), platform, alice.ID); len(cs) != 0 {
			t.Fatalf("%s: alice has connections %+v", when, cs)
		}
	}

	signedIn(t, h, v, alice, "PENDINGBOB0000000000000001", "bob-at-gh")
	waiting("after bob's sign-in with alice's link")
	card := confirmCard(t, h, alice, "bob-at-gh")
	for _, p := range h.s.PostsIn("D-" + bob.ID) {
		if strings.Contains(cardText(p.Out.Card), "was it you?") {
			t.Fatal("the confirmation card was posted to bob")
		}
	}
	// Bob presses Confirm (a forwarded card or token), from his DM and from hers.
	for _, sc := range []core.Scope{dmScope(bob), dmScope(alice)} {
		h.click(bob, token(card, "confirm"), sc)
		h.idle()
	}
	waiting("after bob's clicks")
	// Alice sees bob's account and rejects it.
	h.click(alice, token(card, "reject"), dmScope(alice))
	h.idle()
	waiting("after alice rejected")
	if dm := h.s.PostsIn("D-" + alice.ID); !strings.Contains(dm[len(dm)-1].Out.Text, "Not connected") {
		t.Fatalf("alice is not told: %q", dm[len(dm)-1].Out.Text)
	}
	// A replayed confirmation of the rejected sign-in does nothing.
	h.click(alice, token(card, "confirm"), dmScope(alice))
	h.idle()
	waiting("after a replayed confirmation")

	// Her own sign-in: she confirms, the call runs as her account.
	signedIn(t, h, v, alice, "PENDINGALICE00000000000001", "alice-at-gh")
	waiting("before alice confirmed")
	h.click(alice, token(confirmCard(t, h, alice, "alice-at-gh"), "confirm"), dmScope(alice))
	h.idle()
	if got := log.get(); len(got) != 2 || got[1] != "as:UALICE:"+tokenMark+"alice-at-gh" {
		t.Fatalf("after alice confirmed: %v", got)
	}
	if st := h.runs("C1")[run].Status; st != core.RunDone {
		t.Fatalf("status %s, want done", st)
	}
	h.verify("C1")
	h.verify("D-" + alice.ID)
}
