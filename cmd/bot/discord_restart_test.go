package main

import (
	"strings"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/adapters/discord/discordfake"
	"github.com/marlowe-bot/marlowe/internal/testpg"
	"github.com/marlowe-bot/marlowe/internal/testredis"
)

// The real binary answers a Discord mention in a thread and is SIGKILLed.
// While it is down a follow-up is posted in that thread, and chatter by
// someone else at the channel's top level; Discord replays nothing of a
// dead session, and the restarted process saw nothing. Its first IDENTIFY
// reads, from the journal, the channels that still had an intent window
// (GET channels/{thread}/messages?after=<the journaled answer>): the
// follow-up is answered exactly once, in the thread; the chatter, outside
// any window, is read but never answered. (Before the journal-backed gap
// fill the follow-up was never delivered.)
func TestDiscordRestartAnswersWhatWasPostedWhileDown(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the bot and SIGKILLs it (-short skips it)")
	}
	t.Parallel()
	dbURL := testpg.New(t)
	rs := testredis.StartServer(t)
	dc := newDiscordReplicaFake(t, false)
	_, modelURL := slowModelFake(t, 50*time.Millisecond)
	bin := buildCrashBot(t)
	key := "MARLOWE_SIGNING_KEY=" + testSigningKey(t)
	r := &replicaProc{t: t, bin: bin, name: "r0", logs: &syncBuffer{},
		env: discordReplicaEnv(t.TempDir(), "r0", dbURL, rs.URL(), key, dc.APIURL(), modelURL)}
	r.start()
	t.Cleanup(r.kill)
	waitFake := func(what string, d time.Duration, cond func() bool) {
		t.Helper()
		if !dc.Wait(d, cond) {
			t.Fatalf("timed out waiting for %s\n%s", what, r.logs.String())
		}
	}
	isAnswer := func(p discordfake.Message, word string) bool {
		return strings.Contains(p.Content, "You said:") && strings.Contains(p.Content, word)
	}
	answers := func(word string) (n int, in []string) {
		for _, p := range dc.PostsLocked() {
			if isAnswer(p, word) {
				n++
				in = append(in, p.ChannelID)
			}
		}
		return n, in
	}
	waitFake("the bot's gateway session", qaStartTimeout, func() bool { return dc.LiveSessionsLocked() == 1 })

	root := dc.Say(discordfake.Msg{Channel: drGeneral, Author: drAlice, Content: "<@" + dc.Bot().ID + "> please echo gdzq1"})
	waitFake("the mention's answer", 60*time.Second, func() bool { n, _ := answers("gdzq1"); return n == 1 })
	waitRunsEnded(t, dbURL, r.logs.String)
	r.kill()
	waitFake("the killed session gone", 30*time.Second, func() bool { return dc.LiveSessionsLocked() == 0 })

	// Nobody receives these: the only session is dead.
	dc.Say(discordfake.Msg{Channel: root, Author: drAlice, Content: "and a follow-up gdfu1"})
	dc.Say(discordfake.Msg{Channel: drGeneral, Author: drCarol, Content: "chatter gdcx1 among people"})
	readsBefore := len(threadReads(dc.Calls(), root))

	r.start()
	waitFake("the follow-up answered after the restart", 90*time.Second, func() bool { n, _ := answers("gdfu1"); return n >= 1 })
	waitRunsEnded(t, dbURL, r.logs.String)
	if n, in := answers("gdfu1"); n != 1 || in[0] != root {
		t.Errorf("follow-up answered %d times in %q, want once in the thread %s", n, in, root)
	}
	if n, _ := answers("gdzq1"); n != 1 {
		t.Errorf("the mention answered %d times, want once", n)
	}
	if len(threadReads(dc.Calls(), root)) <= readsBefore {
		t.Errorf("the thread was not read after the restart")
	}
	if len(threadReads(dc.Calls(), drGeneral)) == 0 {
		t.Errorf("general (the mention's channel) was not read after the restart: the chatter check proves nothing")
	}
	for _, p := range dc.Posts() {
		if strings.Contains(p.Content, "gdcx1") {
			t.Errorf("chatter outside any window was answered: %q", p.Content)
		}
	}
}

// threadReads lists the GET channels/{ch}/messages calls (gap fill's reads).
func threadReads(calls []discordfake.Call, ch string) []discordfake.Call {
	var out []discordfake.Call
	for _, c := range calls {
		if c.Method == "GET" && strings.HasPrefix(c.Path, "channels/"+ch+"/messages") {
			out = append(out, c)
		}
	}
	return out
}
