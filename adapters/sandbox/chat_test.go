package sandbox

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
)

// The chat commands through the sandbox's HTTP API against the real
// engine: a deploy waits for approval, `approvals` and `status` list it
// with its thread, a bystander's `cancel` is refused, and the requester's
// stops the run visibly (its plan, the card and a notice).
func TestChatCommandsBehindSandbox(t *testing.T) {
	sb := newSandbox(t, Config{Clock: time.Now})
	eng := newEngine(t, sb)
	base := run(t, sb, eng.Deliver)
	find := func(cond func(m message) bool) (message, bool) { return findMessage(sb, cond) }
	waitMsg := func(what string, cond func(m message) bool) message {
		t.Helper()
		return waitMessage(t, sb, what, cond)
	}
	answer := func(thread, substr string) message {
		t.Helper()
		return waitMsg("an answer with "+substr, func(m message) bool { return m.Bot && m.Thread == thread && strings.Contains(m.Text, substr) })
	}

	q := say(t, base, "alice", "general", "", "<@marlowe> please deploy 1.4 to staging")
	card := waitMsg("the approval card", func(m message) bool { return m.Bot && m.Thread == q && m.Card != nil && len(m.Card.Actions) > 0 })

	a := say(t, base, "carol", "general", "", "<@marlowe> approvals")
	if got := answer(a, "1 request waiting"); !strings.Contains(got.Text, "deploy (irreversible) — asked by <@alice>") || !strings.Contains(got.Text, base+"/#c=general&t="+url.QueryEscape(q)) {
		t.Errorf("approvals = %q", got.Text)
	}
	s := say(t, base, "carol", "general", "", "<@marlowe> status")
	// "in this channel": the approvals run may still be finishing.
	if got := answer(s, "in this channel:"); !strings.Contains(got.Text, "waiting for approval of deploy — asked by <@alice>") {
		t.Errorf("status = %q", got.Text)
	}

	say(t, base, "carol", "general", q, "cancel")
	if r := answer(q, "Only <@alice> or an admin can cancel this"); r.To != "carol" {
		t.Errorf("the refusal went to %q, want only carol", r.To)
	}
	say(t, base, "alice", "general", q, "cancel")
	answer(q, "🚫 Stopped: cancelled by <@alice>.")
	// The run's plan (a stream, the default) stops in the cancelled state,
	// its deploy task failed.
	plan := waitMsg("the plan stopped", func(m message) bool {
		return m.Bot && m.Thread == q && m.Stream != nil && m.Stream.Stopped && strings.HasPrefix(m.Stream.Title, "🚫 Stopped — cancelled by <@alice>")
	})
	if len(plan.Stream.Tasks) != 1 || plan.Stream.Tasks[0].Title != "deploy" || plan.Stream.Tasks[0].Status != core.TaskError {
		t.Errorf("cancelled plan's tasks: %+v, want the deploy failed", plan.Stream.Tasks)
	}
	waitMsg("the card decided", func(m message) bool { return m.ID == card.ID && m.Card != nil && m.Card.Resolution != "" })
	if _, ok := find(func(m message) bool { return strings.Contains(m.Text, deployResult) }); ok {
		t.Error("the cancelled deploy ran")
	}
}
