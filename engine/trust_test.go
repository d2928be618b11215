package engine_test

import (
	"context"
	"strings"
	"testing"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/engine"
)

var dave = core.Person{ID: "UDAVE", Name: "Dave"}

// Attack (owner-minted channel-wide consent): in a channel whose only
// approver is Bob, Alice answers her own unattended run's consent card with
// "Always allow". It must not become a grant that lets anyone's attended
// run do that action with no approver asked; Allow once still works for
// her own run, and the card says whom "Always allow" covers.
func TestAttackOwnerCannotMintChannelWideConsent(t *testing.T) {
	h, log := sendHarness(t, func(c *engine.Config) { c.DefaultPolicy = core.Policy{Approvers: []string{bob.ID}} })
	if _, err := h.e.StartUnattended(context.Background(), core.UnattendedRun{
		Scope: chanScope("C1"), Owner: alice, Instruction: "post the weekly digest", Trigger: "routine-1",
	}); err != nil {
		t.Fatal(err)
	}
	h.idle()
	cards := dmCards(h, alice)
	if len(cards) != 1 {
		t.Fatalf("owner's DM cards = %d", len(cards))
	}
	var covers string
	for _, f := range cards[0].Out.Card.Fields {
		if f.Label == "Always allow covers" {
			covers = f.Value
		}
	}
	if !strings.Contains(covers, "everyone's runs") || !strings.Contains(covers, "only the channel's approvers or admins") {
		t.Errorf("the card does not say whom Always allow covers: %q", covers)
	}
	h.click(alice, token(cards[0].Out.Card, "always"), dmScope(alice))
	h.idle()
	if n := h.count("C1", core.KindConsentGranted); n != 0 {
		t.Fatalf("the owner, no approver, minted %d channel-wide grant(s)", n)
	}
	if len(log.get()) != 0 {
		t.Fatalf("a refused Always allow ran the action: %v", log.get())
	}
	h.click(alice, token(cards[0].Out.Card, "approve"), dmScope(alice))
	h.idle()
	if len(log.get()) != 1 {
		t.Fatalf("the owner's Allow once: sends %v", log.get())
	}
	// Carol's attended run asks the approver, and sends nothing meanwhile.
	h.deliver(h.mention(carol, "C1", "share the news"))
	h.idle()
	if len(log.get()) != 1 {
		t.Fatalf("carol's run sent on the owner's consent: %v", log.get())
	}
	if n := len(threadCards(h, "C1")); n != 1 {
		t.Fatalf("carol's run: %d cards in the channel, want the approver asked", n)
	}
}

// A grant journaled before grants said what they cover counts only while
// its granter is one of the channel's approvers: an owner's old "Always
// allow" stops covering everyone.
func TestAttackLegacyOwnerGrantDoesNotCoverTheChannel(t *testing.T) {
	h, log := sendHarness(t, func(c *engine.Config) { c.DefaultPolicy = core.Policy{Approvers: []string{bob.ID}} })
	d, err := h.b.Human(alice, chanScope("C1"), core.Meta{}, &core.ConsentGranted{ConsentID: "K1", Tool: "send_to", Destination: "announce", Owner: alice.ID})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.j.Append(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	h.restart()
	h.deliver(h.mention(carol, "C1", "share the news"))
	h.idle()
	if len(log.get()) != 0 || len(threadCards(h, "C1")) != 1 {
		t.Fatalf("an owner's legacy grant covered carol's run: sends %v, cards %d", log.get(), len(threadCards(h, "C1")))
	}
}

// Attack (no approvers means anyone): with no approvers listed, a member
// cannot approve an irreversible action (the admins decide), even from the
// thread card.
func TestAttackNoApproversIrreversibleIsForAdminsOnly(t *testing.T) {
	h, log, ev := wipeHarness(t, platformAdmins(dave.ID))
	card, _ := cardOf(h)
	h.click(carol, token(card, "approve"), threadOf(ev))
	h.idle()
	if len(log.get()) != 0 {
		t.Fatalf("a member approved an irreversible action: %v", log.get())
	}
	h.click(dave, token(card, "approve"), threadOf(ev))
	h.idle()
	if got := log.get(); len(got) != 1 {
		t.Fatalf("the workspace admin's approval on the thread card: %v", got)
	}
}

// Attack: with no approvers listed, a send asked in a DM is decided by the
// admins only, and a member holding the card's token decides nothing from
// another conversation.
func TestAttackNoApproversDMAskedIsForAdminsOnly(t *testing.T) {
	h, log := sendHarness(t, func(c *engine.Config) { c.Operators = []core.Operator{{Platform: platform, UserID: dave.ID}} })
	h.deliver(h.inDM(alice, "share the news"))
	h.idle()
	cards := dmCards(h, alice)
	if len(cards) != 1 {
		t.Fatalf("cards in alice's DM = %d", len(cards))
	}
	tok := token(cards[0].Out.Card, "approve")
	h.click(bob, tok, chanScope("C1"))
	h.click(bob, tok, dmScope(alice))
	h.click(alice, tok, dmScope(alice))
	h.idle()
	if len(log.get()) != 0 {
		t.Fatalf("a non-admin approved a DM-asked send: %v", log.get())
	}
	h.click(dave, tok, dmScope(dave))
	h.idle()
	if len(log.get()) != 1 {
		t.Fatalf("the admin's approval: sends %v", log.get())
	}
}

// With no approvers listed, members decide a non-irreversible card from
// its own conversation only: the same token clicked from elsewhere is
// refused.
func TestAttackMembersDecideOnlyFromTheCardsConversation(t *testing.T) {
	h, log := sendHarness(t)
	ev := h.mention(alice, "C1", "share the news")
	h.deliver(ev)
	h.idle()
	card, _ := cardOf(h)
	h.click(bob, token(card, "approve"), dmScope(bob))
	h.click(bob, token(card, "approve"), chanScope("C2"))
	h.idle()
	if len(log.get()) != 0 {
		t.Fatalf("a click from another conversation decided: %v", log.get())
	}
	h.click(bob, token(card, "approve"), threadOf(ev))
	h.idle()
	if len(log.get()) != 1 {
		t.Fatalf("a member's click on the thread card: sends %v", log.get())
	}
}
