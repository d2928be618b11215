package engine_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/engine"
)

// waitFor awaits a condition the engine reaches on its own (a deadline
// timer), failing after a generous bound.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestBystanderMessageDoesNotKillAPendingApproval: Carol, who is neither
// the requester nor an approver, says "hmm" in the thread while Alice's
// irreversible action waits for Bob. The card stays pending; Carol's message
// reaches the run as steering after Bob decides.
func TestBystanderMessageDoesNotKillAPendingApproval(t *testing.T) {
	h, log, ev := wipeHarness(t, func(c *engine.Config) {
		c.DefaultPolicy = core.Policy{Approvers: []string{bob.ID}}
	})
	card, post := cardOf(h)
	h.deliver(h.inThread(carol, "C1", ev.MessageID, "hmm, interesting"))
	h.idle()
	if res := payloads[*core.ApprovalResolved](h, "C1", core.KindApprovalResolved); len(res) != 0 {
		t.Fatalf("a bystander's message resolved the approval: %+v", res)
	}
	cur, _ := h.s.Current(post.Ref.ID)
	if cur.Card == nil || cur.Card.Resolution != "" || len(cur.Card.Actions) == 0 {
		t.Fatalf("card changed after a bystander spoke: %+v", cur.Card)
	}
	for _, r := range h.runs("C1") {
		if r.Status != core.RunWaitingApproval {
			t.Fatalf("run %s, want waiting-approval", r.Status)
		}
	}
	h.click(bob, token(card, "approve"), threadOf(ev))
	h.idle()
	if got := log.get(); len(got) != 1 || got[0] != "wipe:42" {
		t.Fatalf("approved action executions = %v", got)
	}
	views := h.m.Views()
	var sawMsg bool
	for _, m := range views[len(views)-1].Messages {
		sawMsg = sawMsg || strings.Contains(m.Text, "hmm, interesting")
	}
	if !sawMsg {
		t.Errorf("the bystander's message never reached the run")
	}
	if n := h.count("C1", core.KindRunStarted); n != 1 {
		t.Errorf("run.started = %d", n)
	}
}

// TestApproverMessageSupersedesThePendingApproval: someone who could decide
// may instead say something new, which supersedes the card.
func TestApproverMessageSupersedesThePendingApproval(t *testing.T) {
	h, log, ev := wipeHarness(t, func(c *engine.Config) {
		c.DefaultPolicy = core.Policy{Approvers: []string{bob.ID}}
	})
	_, post := cardOf(h)
	h.deliver(h.inThread(bob, "C1", ev.MessageID, "wait, wrong record"))
	h.idle()
	if len(log.get()) != 0 {
		t.Fatalf("executed")
	}
	cur, _ := h.s.Current(post.Ref.ID)
	if cur.Card == nil || !strings.Contains(cur.Card.Resolution, "Superseded") {
		t.Errorf("card = %+v", cur.Card)
	}
}

// TestApprovalExpiresOnTimeWithoutAClick: nobody clicks, nobody speaks, the
// process keeps running: the card expires at its deadline, visibly, and
// the run ends with nothing done.
func TestApprovalExpiresOnTimeWithoutAClick(t *testing.T) {
	h, log, _ := wipeHarness(t, func(c *engine.Config) { c.ApprovalTTL = 150 * time.Millisecond })
	_, post := cardOf(h)
	waitFor(t, "the card to show it expired", func() bool {
		cur, _ := h.s.Current(post.Ref.ID)
		return cur.Card != nil && strings.Contains(cur.Card.Resolution, "Expired")
	})
	if err := h.e.WaitIdle(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the run to end", func() bool {
		for _, r := range h.runs("C1") {
			if r.Status != core.RunCancelled {
				return false
			}
		}
		return true
	})
	if len(log.get()) != 0 {
		t.Fatalf("expired approval executed")
	}
	cur, _ := h.s.Current(post.Ref.ID)
	if len(cur.Card.Actions) != 0 {
		t.Errorf("expired card still has buttons: %+v", cur.Card)
	}
	res := payloads[*core.ApprovalResolved](h, "C1", core.KindApprovalResolved)
	if len(res) != 1 || res[0].Decision != "expired" {
		t.Errorf("resolution = %+v", res)
	}
	cl, _ := h.s.Current(h.s.Posts()[0].Ref.ID)
	if !strings.HasPrefix(cl.Text, "🚫 Stopped") {
		t.Errorf("checklist = %q", cl.Text)
	}
}

// TestDeclineIsLoggedAsADecline: the log says what was decided, not that a
// click was "accepted".
func TestDeclineIsLoggedAsADecline(t *testing.T) {
	h, _, ev := wipeHarness(t)
	card, _ := cardOf(h)
	h.click(bob, token(card, "decline"), threadOf(ev))
	h.idle()
	var line string
	for _, l := range strings.Split(h.logs.String(), "\n") {
		if strings.Contains(l, "card click") {
			line = l
		}
	}
	if !strings.Contains(line, "decision=declined") || strings.Contains(line, "accepted=true") {
		t.Errorf("log line = %q", line)
	}
	res := payloads[*core.ApprovalResolved](h, "C1", core.KindApprovalResolved)
	if len(res) != 1 || res[0].Decision != "declined" {
		t.Errorf("resolution = %+v", res)
	}
}
