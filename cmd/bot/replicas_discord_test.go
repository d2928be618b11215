package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/adapters/discord/discordfake"
	"github.com/marlowe-bot/marlowe/internal/testpg"
	"github.com/marlowe-bot/marlowe/internal/testredis"
	"github.com/marlowe-bot/marlowe/llm/llmtest"
)

// Several replicas of the real binary against a fake Discord that keeps a
// gateway session per replica and sends every dispatch to each of them, as
// Discord does for several sessions of one shard: each replica receives
// every message and every click, and the Redis dedupe and the journal must
// make each one count once.

const (
	drGuild   = "320000000000000001"
	drGeneral = "320000000000000010"
	drOps     = "320000000000000011"
)

var (
	drAlice = discordfake.User{ID: "220000000000000001", Username: "alice"}
	drBob   = discordfake.User{ID: "220000000000000002", Username: "bob"}
	drCarol = discordfake.User{ID: "220000000000000003", Username: "carol"}
)

// discordReplicaEnv is replicaEnv with Discord in place of Slack.
func discordReplicaEnv(dir, name, dbURL, redisURL, key, apiURL, modelURL string, extra ...string) []string {
	var env []string
	for _, kv := range replicaEnv(dir, name, dbURL, redisURL, key, "", modelURL, extra...) {
		if !strings.HasPrefix(kv, "SLACK_") && !strings.HasPrefix(kv, "MARLOWE_SLACK_") {
			env = append(env, kv)
		}
	}
	return append(env, "DISCORD_BOT_TOKEN=discord-replicas", "MARLOWE_DISCORD_API_URL="+apiURL)
}

// newDiscordReplicaFake is a fake Discord with one guild (#general, #ops)
// that echoes the bot's posts; multi keeps a gateway session per replica.
func newDiscordReplicaFake(t *testing.T, multi bool) *discordfake.Server {
	dc := discordfake.New(discordfake.Config{
		Token: "discord-replicas", EchoPosts: true, MultiSession: multi,
		Guilds: []discordfake.Guild{{ID: drGuild, OwnerID: drCarol.ID, Channels: []discordfake.Channel{
			{ID: drGeneral, Name: "general"}, {ID: drOps, Name: "ops"},
		}}},
	})
	t.Cleanup(dc.Close)
	return dc
}

// TestReplicasAnswerEachDiscordMessageOnceThroughKills: two replicas, each
// holding its own gateway session, so both receive every MESSAGE_CREATE.
// 20 mentions over two channels, untagged follow-ups in the bot's threads
// (one sent right after the kill), chatter outside any window; the
// replica owning the channels is SIGKILLed mid-stream and restarted. Every
// mention and follow-up is answered exactly once in its thread, chatter
// never, no run ends twice, the journal verifies. Then one approval click,
// delivered to both sessions, is decided once: one approved post, one
// accepted decision, one acknowledgement.
func TestReplicasAnswerEachDiscordMessageOnceThroughKills(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the bot and runs two replicas of it (-short skips it)")
	}
	t.Parallel()
	dbURL := testpg.New(t)
	rs := testredis.StartServer(t)
	dc := newDiscordReplicaFake(t, true)
	model, modelURL := slowModelFake(t, 300*time.Millisecond)
	bin := buildCrashBot(t)
	key := "MARLOWE_SIGNING_KEY=" + testSigningKey(t)
	var reps []*replicaProc
	dump := func() string { return dumpLogs(reps) }
	waitSessions := func(n int) {
		t.Helper()
		if !dc.Wait(qaStartTimeout, func() bool { return dc.LiveSessionsLocked() == n }) {
			t.Fatalf("live gateway sessions never reached %d\n%s", n, dump())
		}
	}
	for i := range 2 {
		name := fmt.Sprintf("r%d", i)
		r := &replicaProc{t: t, bin: bin, name: name, logs: &syncBuffer{},
			env: discordReplicaEnv(t.TempDir(), name, dbURL, rs.URL(), key, dc.APIURL(), modelURL, "MARLOWE_LEASE_TTL=2s")}
		reps = append(reps, r)
		r.start()
		t.Cleanup(r.kill)
		waitSessions(i + 1) // the first runs the migrations alone
	}

	mention := "<@" + dc.Bot().ID + ">"
	isAnswer := func(p discordfake.Message, word string) bool {
		return strings.Contains(p.Content, "You said:") && strings.Contains(p.Content, word)
	}
	answered := func(word string) int {
		n := 0
		for _, p := range dc.Posts() {
			if isAnswer(p, word) {
				n++
			}
		}
		return n
	}
	waitPost := func(what string, match func(discordfake.Message) bool) discordfake.Message {
		t.Helper()
		var found discordfake.Message
		if !dc.Wait(60*time.Second, func() bool {
			for _, p := range dc.PostsLocked() {
				if match(p) {
					found = p
					return true
				}
			}
			return false
		}) {
			t.Fatalf("timed out waiting for %s\n%s", what, dump())
		}
		return found
	}

	const mentions, chatterPerMention, lag = 20, 3, 4
	roots := map[string]string{} // word → the mention's id, which is its thread's
	var followUps []string
	followUp := func(i int) {
		word := fmt.Sprintf("zq%03d", i)
		waitPost(word+"'s answer", func(p discordfake.Message) bool { return isAnswer(p, word) })
		fu := fmt.Sprintf("fu%03d", i)
		dc.Say(discordfake.Msg{Channel: roots[word], Author: drCarol, Content: "and a follow-up " + fu})
		followUps = append(followUps, fu)
	}
	for i := range mentions {
		word := fmt.Sprintf("zq%03d", i)
		ch := []string{drGeneral, drOps}[i%2]
		who := []discordfake.User{drAlice, drBob}[i%2]
		roots[word] = dc.Say(discordfake.Msg{Channel: ch, Author: who, Content: mention + " please echo " + word})
		for k := range chatterPerMention {
			dc.Say(discordfake.Msg{Channel: ch, Author: drCarol, Content: fmt.Sprintf("chatter cx%03d-%02d among people", i, k)})
		}
		if i == 10 {
			// SIGKILL the replica owning the channels while runs are in
			// flight, and restart it: it comes back with a new session.
			r := reps[owner(t, dbURL, reps)]
			r.kill()
			r.start()
		}
		// A follow-up in an earlier mention's thread, every other mention:
		// one goes right after the kill.
		if i >= lag && i%2 == 0 {
			followUp(i - lag)
		}
		time.Sleep(50 * time.Millisecond) // pacing, not a wait for an outcome
	}
	for i := mentions - lag; i < mentions; i += 2 {
		followUp(i)
	}
	for i := range mentions {
		word := fmt.Sprintf("zq%03d", i)
		p := waitPost(word+"'s answer", func(p discordfake.Message) bool { return isAnswer(p, word) })
		if p.ChannelID != roots[word] {
			t.Errorf("%s answered in %s, want the thread on its mention %s", word, p.ChannelID, roots[word])
		}
	}
	for _, fu := range followUps {
		waitPost(fu+"'s answer", func(p discordfake.Message) bool { return isAnswer(p, fu) })
	}
	waitRunsEnded(t, dbURL, dump)

	for i := range mentions {
		if n := answered(fmt.Sprintf("zq%03d", i)); n != 1 {
			t.Errorf("zq%03d answered %d times", i, n)
		}
	}
	for _, fu := range followUps {
		if n := answered(fu); n != 1 {
			t.Errorf("follow-up %s answered %d times", fu, n)
		}
	}
	for _, p := range dc.Posts() {
		if strings.Contains(p.Content, "chatter cx") {
			t.Errorf("chatter outside any window was answered: %q", p.Content)
		}
		if p.ChannelID == drGeneral || p.ChannelID == drOps {
			t.Errorf("the bot posted at the top level of %s: %q", p.ChannelID, p.Content)
		}
	}
	// By a sweep or by the claim for the next message there (see
	// maxChannelLeaseToken).
	if n := maxChannelLeaseToken(t, dbURL); n < 2 {
		t.Errorf("no channel lease changed hands (highest token %d): the kill missed the owner", n)
	}

	// One approval click, dispatched to both live sessions, decided once.
	waitSessions(2)
	model.Enqueue(
		llmtest.Tools(llmtest.Call("c1", "post_to_channel", `{"channel":"`+drOps+`","text":"relay report"}`)),
		llmtest.Text("Shared it, relay done."),
	)
	root := dc.Say(discordfake.Msg{Channel: drGeneral, Author: drAlice, Content: mention + " share the report with the ops room"})
	card := waitPost("the approval card", func(p discordfake.Message) bool { return p.ChannelID == root && len(p.Components) > 0 })
	cid := dc.Click(discordfake.Click{Channel: root, MessageID: card.ID, CustomID: buttonWithAction(t, card.Components, 'a'), User: drAlice})
	waitPost("the approved post", func(p discordfake.Message) bool {
		return p.ChannelID == drOps && strings.Contains(p.Content, "relay report")
	})
	waitPost("the run's final answer", func(p discordfake.Message) bool { return strings.Contains(p.Content, "relay done") })
	waitRunsEnded(t, dbURL, dump)
	n := 0
	for _, p := range dc.Posts() {
		if p.ChannelID == drOps {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d posts in ops, want the approved one exactly once", n)
	}
	acks := 0
	for _, cb := range dc.Callbacks() {
		if cb.InteractionID == cid {
			acks++
		}
	}
	if acks != 1 {
		t.Errorf("the click was acknowledged %d times, want 1", acks)
	}
	if n := strings.Count(dump(), "outcome=accepted"); n != 1 {
		t.Errorf("the click was accepted %d times across the replicas, want 1", n)
	}

	for _, r := range reps {
		r.stop()
	}
	verifyReplicas(t, bin, reps[1], dump)
}
