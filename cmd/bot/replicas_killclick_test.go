package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/adapters/slack/slackfake"
	"github.com/marlowe-bot/marlowe/internal/testpg"
	"github.com/marlowe-bot/marlowe/internal/testredis"
	"github.com/marlowe-bot/marlowe/llm/llmtest"
)

// TestReplicasClickAroundAKill: two replicas; an approval card waits in a
// channel; its owner is SIGKILLed just after the approver's click is sent
// (in flight: the dead replica may have taken it or not) or just before
// (the click reaches the survivor, which does not own the channel until
// the lease lapses). Either way the click is decided once, the approved
// action runs exactly once, the run finishes once, and a second click on
// the card is refused as already decided.
func TestReplicasClickAroundAKill(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the bot and runs two replicas of it (-short skips it)")
	}
	t.Parallel()
	dbURL := testpg.New(t)
	rs := testredis.StartServer(t)
	// Redeliveries span more than the adapter's 30 s delivery claim: a click
	// the killed replica claimed but never journaled is taken by the
	// survivor once the dead claim lapses.
	sl := slackfake.New(slackfake.Config{EchoPosts: true, RedeliverAfter: time.Second, MaxRetries: 60,
		Channels: map[string]string{qaGeneral: "channel", qaOther: "channel"},
		Users:    []slackfake.User{{ID: qaAlice, Name: "alice"}, {ID: qaBob, Name: "bob"}}})
	t.Cleanup(sl.Close)
	model := llmtest.NewOpenAIServer(t)
	bin := buildCrashBot(t)
	reps := startReplicas(t, 2, bin, dbURL, rs.URL(), sl, model.URL, "MARLOWE_LEASE_TTL=2s", "MARLOWE_ADMINS=slack:"+qaBob)
	dump := func() string { return dumpLogs(reps) }
	waitPost := func(what string, match func(slackfake.Post) bool) slackfake.Post {
		t.Helper()
		return waitSlackPost(t, sl, 90*time.Second, dump, what, match)
	}
	count := func(match func(slackfake.Post) bool) int { return countSlackPosts(sl, match) }
	mention := "<@" + sl.Config().BotUserID + ">"
	for i, killFirst := range []bool{false, true, false, true} {
		word := fmt.Sprintf("kc%02d", i)
		model.Enqueue(
			llmtest.Tools(llmtest.Call("c1", "post_to_channel", `{"channel":"`+qaOther+`","text":"`+word+` report"}`)),
			llmtest.Text("Shared it, "+word+" done."),
		)
		root, _ := sl.Say(qaGeneral, "", qaAlice, mention+" share the report with the other room "+word)
		card := waitPost("the approval card for "+word, func(p slackfake.Post) bool { return p.ThreadTS == root && isCard(p) })
		// Each call is a new click on the card's button (its own action_ts).
		click := func() []byte {
			return sl.BlockActionsJSON(slackfake.Click{
				Channel: qaGeneral, MessageTS: card.TS, ThreadTS: root, User: qaBob, UserName: "bob",
				ActionID: "approve", Value: cardButtons(t, card.Blocks)["approve"], Label: "Approve",
			})
		}
		victim := reps[owner(t, dbURL, reps)]
		if killFirst {
			victim.kill()
			sl.PushInteraction(click())
		} else {
			sl.PushInteraction(click())
			victim.kill()
		}
		waitPost(word+"'s final answer", func(p slackfake.Post) bool { return strings.Contains(p.Text, word+" done") })
		victim.start()
		waitConns(t, sl, 2, reps)
		sl.PushInteraction(click()) // Bob clicks the decided card again
		waitPost("the replayed click refused for "+word, func(p slackfake.Post) bool {
			return p.ThreadTS == root && strings.Contains(p.Text, "already decided")
		})
	}
	waitRunsEnded(t, dbURL, dump)
	for i := range 4 {
		word := fmt.Sprintf("kc%02d", i)
		if n := count(func(p slackfake.Post) bool { return p.Channel == qaOther && strings.Contains(p.Text, word+" report") }); n != 1 {
			t.Errorf("%s: the approved post was made %d times", word, n)
		}
		if n := count(func(p slackfake.Post) bool { return strings.Contains(p.Text, word+" done") }); n != 1 {
			t.Errorf("%s: the final answer was posted %d times", word, n)
		}
	}
	// Each kill took the channel's owner down, so both replicas drove it.
	for _, r := range reps {
		if !claimedBy(r)["slack/"+sl.Config().TeamID+"/"+qaGeneral] {
			t.Errorf("%s never claimed the channel: the kills missed its owner", r.name)
		}
	}
	for _, r := range reps {
		r.stop()
	}
	if t.Failed() {
		t.Logf("replica logs:\n%s", dump())
	}
}
