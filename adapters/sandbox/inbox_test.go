package sandbox

import (
	"strings"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/engine"
)

// withApprovers makes Alice and Carol the approvers of every channel.
func withApprovers(c *engine.Config) {
	c.DefaultPolicy = core.Policy{Approvers: []string{"alice", "carol"}}
}

// TestInboxBehindSandbox: Bob's deploy request reaches Alice's and Carol's
// DMs with the bot (not Bob's); Alice approves from her DM; the thread card
// and Carol's DM card show it; `inbox` answers in the DM.
func TestInboxBehindSandbox(t *testing.T) {
	sb := newSandbox(t, Config{Clock: time.Now})
	base := run(t, sb, engineDeliver(t, sb, withApprovers))
	find := func(cond func(m message) bool) (message, bool) { return findMessage(sb, cond) }
	waitMsg := func(what string, cond func(m message) bool) message {
		t.Helper()
		return waitMessage(t, sb, what, cond)
	}
	pendingCard := func(ch string) func(m message) bool {
		return func(m message) bool { return m.Bot && m.Channel == ch && m.Card != nil && len(m.Card.Actions) > 0 }
	}

	q := say(t, base, "bob", "general", "", "<@marlowe> deploy release 1.4 to staging")
	thread := waitMsg("the thread card", pendingCard("general"))
	aliceCard := waitMsg("Alice's DM card", pendingCard("dm-alice"))
	carolCard := waitMsg("Carol's DM card", pendingCard("dm-carol"))
	if _, ok := find(func(m message) bool { return m.Channel == "dm-bob" && m.Card != nil }); ok {
		t.Error("the requester got a DM card")
	}
	if thread.Thread != q || aliceCard.Thread != "" {
		t.Fatalf("thread card under %q, DM card under %q", thread.Thread, aliceCard.Thread)
	}

	if code, body := postJSON(t, base+"/api/click", map[string]string{"person": "alice", "message": aliceCard.ID, "action": "approve"}); code != 202 {
		t.Fatalf("click: %d %s", code, body)
	}
	for _, id := range []string{thread.ID, aliceCard.ID, carolCard.ID} {
		waitMsg("card "+id+" resolved", func(m message) bool {
			return m.ID == id && m.Card != nil && strings.Contains(m.Card.Resolution, "Approved by Alice") && len(m.Card.Actions) == 0
		})
	}
	waitMsg("the deploy result", func(m message) bool { return m.Bot && m.Thread == q && strings.Contains(m.Text, deployResult) })

	// Carol cannot press her resolved card; `inbox` in her DM says nothing waits.
	if code, _ := postJSON(t, base+"/api/click", map[string]string{"person": "carol", "message": carolCard.ID, "action": "decline"}); code == 202 {
		t.Error("a resolved card accepted a click")
	}
	say(t, base, "carol", "dm-carol", "", "inbox")
	waitMsg("Carol's inbox", func(m message) bool {
		return m.Bot && m.Channel == "dm-carol" && strings.Contains(m.Text, "Nothing waits for you")
	})
}
