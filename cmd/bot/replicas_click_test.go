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

// TestReplicasDecideEachClickOnce: three replicas of the built binary; the
// fake Slack hands each button click to one of them in turn, so most clicks
// reach a replica that does not own the channel. Every valid click is
// decided once (the approved post happens exactly once), and each replayed
// click is refused as already decided.
func TestReplicasDecideEachClickOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the bot and runs three replicas of it (-short skips it)")
	}
	t.Parallel()
	dbURL := testpg.New(t)
	rs := testredis.StartServer(t)
	sl := slackfake.New(slackfake.Config{EchoPosts: true, RedeliverAfter: 2 * time.Second,
		Channels: map[string]string{qaGeneral: "channel", qaOther: "channel"},
		Users:    []slackfake.User{{ID: qaAlice, Name: "alice"}, {ID: qaBob, Name: "bob"}}})
	t.Cleanup(sl.Close)
	model := llmtest.NewOpenAIServer(t)
	bin := buildCrashBot(t)
	reps := startReplicas(t, 3, bin, dbURL, rs.URL(), sl, model.URL, "MARLOWE_LEASE_TTL=2s", "MARLOWE_ADMINS=slack:"+qaBob)
	dump := func() string { return dumpLogs(reps) }
	waitPost := func(what string, match func(slackfake.Post) bool) slackfake.Post {
		t.Helper()
		return waitSlackPost(t, sl, 30*time.Second, dump, what, match)
	}
	count := func(match func(slackfake.Post) bool) int { return countSlackPosts(sl, match) }
	mention := "<@" + sl.Config().BotUserID + ">"
	const rounds = 6
	for i := range rounds {
		word := fmt.Sprintf("relay%02d", i)
		model.Enqueue(
			llmtest.Tools(llmtest.Call("c1", "post_to_channel", `{"channel":"`+qaOther+`","text":"`+word+` report"}`)),
			llmtest.Text("Shared it, "+word+" done."),
		)
		root, _ := sl.Say(qaGeneral, "", qaAlice, mention+" share the report with the other room "+word)
		card := waitPost("the approval card for "+word, func(p slackfake.Post) bool { return p.ThreadTS == root && isCard(p) })
		click := sl.BlockActionsJSON(slackfake.Click{
			Channel: qaGeneral, MessageTS: card.TS, ThreadTS: root, User: qaBob, UserName: "bob",
			ActionID: "approve", Value: cardButtons(t, card.Blocks)["approve"], Label: "Approve",
		})
		sl.PushInteraction(click)
		waitPost(word+"'s final answer", func(p slackfake.Post) bool { return strings.Contains(p.Text, word+" done") })
		sl.PushInteraction(click) // replayed: to another replica, round-robin
		waitPost("the replayed click refused for "+word, func(p slackfake.Post) bool {
			return p.ThreadTS == root && strings.Contains(p.Text, "already decided")
		})
	}
	for i := range rounds {
		word := fmt.Sprintf("relay%02d", i)
		if n := count(func(p slackfake.Post) bool { return p.Channel == qaOther && strings.Contains(p.Text, word+" report") }); n != 1 {
			t.Errorf("%s approved post made %d times", word, n)
		}
	}
	if !strings.Contains(dump(), "card click") {
		t.Fatalf("no click logged\n%s", dump())
	}
	// The clicks reached more than one replica (round-robin), so replicas
	// that do not own the channel decided some of them.
	deciders := 0
	for _, r := range reps {
		if strings.Contains(r.logs.String(), "outcome=accepted") {
			deciders++
		}
	}
	if deciders < 2 {
		t.Errorf("valid clicks were decided on %d replica(s); round-robin should spread them", deciders)
	}
	for _, r := range reps {
		r.stop()
	}
	if t.Failed() {
		t.Logf("replica logs:\n%s", dump())
	}
}

// waitSlackPost waits up to d for a post matching match.
func waitSlackPost(t *testing.T, sl *slackfake.Server, d time.Duration, dump func() string, what string, match func(slackfake.Post) bool) slackfake.Post {
	t.Helper()
	for deadline := time.Now().Add(d); ; time.Sleep(10 * time.Millisecond) {
		for _, p := range sl.Posts() {
			if match(p) {
				return p
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s\n%s", what, dump())
		}
	}
}

// countSlackPosts counts the posts matching match.
func countSlackPosts(sl *slackfake.Server, match func(slackfake.Post) bool) int {
	n := 0
	for _, p := range sl.Posts() {
		if match(p) {
			n++
		}
	}
	return n
}

// startReplicas starts n replicas of bin on one database, Redis and fake
// Slack, one after another (each connected before the next starts).
func startReplicas(t *testing.T, n int, bin, dbURL, redisURL string, sl *slackfake.Server, modelURL string, extra ...string) []*replicaProc {
	t.Helper()
	key := "MARLOWE_SIGNING_KEY=" + testSigningKey(t)
	var reps []*replicaProc
	for i := range n {
		name := fmt.Sprintf("r%d", i)
		reps = append(reps, &replicaProc{t: t, bin: bin, name: name, logs: &syncBuffer{},
			env: replicaEnv(t.TempDir(), name, dbURL, redisURL, key, sl.APIURL(), modelURL, extra...)})
		reps[i].start()
		t.Cleanup(reps[i].kill)
		waitConns(t, sl, i+1, reps)
	}
	return reps
}
