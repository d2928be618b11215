package main

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/adapters/discord/discordfake"
	"github.com/marlowe-bot/marlowe/core"
)

// A rolling deploy: no process holds a gateway session while a new mention
// arrives in #ops, a channel the bot last talked in two hours ago (its
// windows closed, no run unfinished: nothing the old gap source named).
// Discord replays nothing to a new session, so only the journal can say
// that #ops is a channel of the bot's. The restarted process's first
// IDENTIFY reads #ops and answers the mention exactly once; a mention
// posted live once the session is up reaches the engine after it, in
// Discord's order. (Before RecentPosts #ops was never read and the mention
// was lost.)
func TestDiscordRestartAnswersAMentionInAQuietChannel(t *testing.T) {
	dc := newDiscordReplicaFake(t, false)
	_, modelURL := slowModelFake(t, 10*time.Millisecond)
	dir := t.TempDir()
	getenv := env(map[string]string{
		"MARLOWE_DATA_DIR":        dir,
		"MARLOWE_HTTP_ADDR":       "127.0.0.1:0",
		"DISCORD_BOT_TOKEN":       "discord-replicas",
		"MARLOWE_DISCORD_API_URL": dc.APIURL(),
		"MARLOWE_MODEL_PROVIDER":  "openai",
		"MARLOWE_MODEL":           "fake-model",
		"MARLOWE_MODEL_BASE_URL":  modelURL,
	})
	mention := "<@" + dc.Bot().ID + ">"
	// Nobody holds a session: these reach no bot.
	old := dc.Say(discordfake.Msg{Channel: drOps, Author: drAlice, Content: mention + " an old question"})
	ops := seedOldAnswer(t, getenv, old, 2*time.Hour)
	down := dc.Say(discordfake.Msg{Channel: drOps, Author: drAlice, Content: mention + " please echo qgap1"})

	ctx, cancel := context.WithCancel(t.Context())
	logs := &syncBuffer{}
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"serve"}, getenv, strings.NewReader(""), io.Discard, logs) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("serve returned %v\n%s", err, logs.String())
			}
		case <-time.After(30 * time.Second):
			t.Error("serve did not stop")
		}
	}
	t.Cleanup(stop)
	if !dc.WaitConnected(30 * time.Second) {
		t.Fatalf("the bot never connected:\n%s", logs.String())
	}
	live := dc.Say(discordfake.Msg{Channel: drOps, Author: drBob, Content: mention + " please echo qlive1"})

	answers := func(word string) (in []string) {
		for _, p := range dc.PostsLocked() {
			if strings.Contains(p.Content, "You said:") && strings.Contains(p.Content, word) {
				in = append(in, p.ChannelID)
			}
		}
		return in
	}
	if !dc.Wait(60*time.Second, func() bool { return len(answers("qgap1")) >= 1 && len(answers("qlive1")) >= 1 }) {
		t.Fatalf("not answered: gap %q, live %q\n%s", answers("qgap1"), answers("qlive1"), logs.String())
	}
	stop()
	if in := answers("qgap1"); len(in) != 1 || in[0] != down {
		t.Errorf("the mention posted while down answered in %q, want once in its thread %s", in, down)
	}
	if in := answers("qlive1"); len(in) != 1 || in[0] != live {
		t.Errorf("the live mention answered in %q, want once in its thread %s", in, live)
	}

	// The engine took them in Discord's order.
	cfg, err := loadConfig(getenv)
	if err != nil {
		t.Fatal(err)
	}
	st, err := openStores(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	cmds, err := st.Journal.Read(t.Context(), ops, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range cmds {
		if c.Kind() == core.KindMessageReceived {
			p, err := core.Decode[*core.MessageReceived](c)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, p.MessageID)
		}
	}
	if want := []string{old, down, live}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("journaled messages %q, want %q (old, the gap's, the live one)", got, want)
	}
}

// seedOldAnswer journals, in the SQLite store of getenv's data dir, a
// finished conversation in #ops ago: msg received, a run answering it in
// its thread. It returns the channel's key.
func seedOldAnswer(t *testing.T, getenv func(string) string, msg string, ago time.Duration) core.ChannelKey {
	t.Helper()
	cfg, err := loadConfig(getenv)
	if err != nil {
		t.Fatal(err)
	}
	st, err := openStores(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	at := time.Now().Add(-ago)
	b := core.NewBoundary(func() time.Time { return at })
	alice := core.Person{ID: drAlice.ID, Name: drAlice.Username}
	sc := core.Scope{Platform: "discord", Workspace: drGuild, Channel: drOps}
	thread := sc
	thread.Thread = msg
	const runID = "r-old"
	mr, err := b.Human(alice, sc, core.Meta{Run: runID}, &core.MessageReceived{MessageID: msg, Author: alice,
		Visibility: core.Public, Text: "an old question", Reason: "mention"})
	if err != nil {
		t.Fatal(err)
	}
	drafts := []core.Draft{mr}
	for _, p := range []core.Payload{
		&core.RunStarted{Trigger: msg},
		&core.MessagePosted{EffectID: "fx-old", MessageID: msg, Answering: msg, AnsweringUser: alice.ID,
			AnsweringTop: true, Role: core.RoleAnswer, Text: "an old answer"},
		&core.RunCompleted{},
	} {
		d, err := b.Agent(runID, thread, core.Meta{}, p)
		if err != nil {
			t.Fatal(err)
		}
		drafts = append(drafts, d)
	}
	if _, err := st.Journal.Append(t.Context(), drafts...); err != nil {
		t.Fatal(err)
	}
	return sc.Key()
}
