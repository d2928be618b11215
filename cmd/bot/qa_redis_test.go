package main

import (
	"strings"
	"testing"

	"github.com/marlowe-bot/marlowe/internal/testredis"
)

// TestRedisRestartKeepsWindows: Redis (holding the intent windows) is
// killed and restarted empty while the bot runs. An untagged follow-up in a
// thread whose window opened before the restart is still answered: the
// windows are rebuilt from the journal when Redis comes back empty.
func TestRedisRestartKeepsWindows(t *testing.T) {
	rs := testredis.StartServer(t)
	b := startQA(t, qaOpts{env: map[string]string{"MARLOWE_REDIS_URL": rs.URL()}})
	root, _ := b.slack.Say(qaGeneral, "", qaBob, b.mention+" beforekiwi are you there?")
	b.waitPost("answer before the restart", saidTo("beforekiwi"))

	rs.Stop()
	rs.Start()
	b.waitLog("intent windows were rebuilt from the journal")

	b.slack.Say(qaGeneral, root, qaCarol, "afterkiwi and now?")
	p := b.waitPost("untagged follow-up after the Redis restart", saidTo("afterkiwi"))
	if p.ThreadTS != root {
		t.Fatalf("follow-up answered in %q, want the thread %s", p.ThreadTS, root)
	}
	if !strings.Contains(b.logs.String(), "redis came back without its data") {
		t.Errorf("no log line saying Redis lost its data")
	}
}
