package main

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/adapters/discord/discordfake"
	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/fold"
	"github.com/marlowe-bot/marlowe/llm/llmtest"
)

// TestServeDiscordAndOpenAIModel runs the composition root as a user would
// configure it with exactly DISCORD_BOT_TOKEN and MARLOWE_DISCORD_API_URL:
// the real discordgo REST client and the adapter's gateway against a local
// fake Discord, an OpenAI-compatible model against a local fake, the
// embedded SQLite store.
func TestServeDiscordAndOpenAIModel(t *testing.T) {
	t.Parallel()
	const (
		guild   = "310000000000000001"
		general = "310000000000000010"
		ops     = "310000000000000011"
	)
	alice := discordfake.User{ID: "210000000000000001", Username: "alice"}
	bob := discordfake.User{ID: "210000000000000002", Username: "bob"}
	carol := discordfake.User{ID: "210000000000000003", Username: "carol"}
	dc := discordfake.New(discordfake.Config{
		Token: "discord-test-token", EchoPosts: true,
		Guilds: []discordfake.Guild{{ID: guild, OwnerID: carol.ID, Channels: []discordfake.Channel{
			{ID: general, Name: "general"}, {ID: ops, Name: "ops"},
		}}},
	})
	t.Cleanup(dc.Close)
	model := llmtest.NewOpenAIServer(t)
	dir := t.TempDir()
	getenv := env(map[string]string{
		"MARLOWE_DATA_DIR":        dir,
		"MARLOWE_HTTP_ADDR":       "127.0.0.1:0",
		"DISCORD_BOT_TOKEN":       "discord-test-token",
		"MARLOWE_DISCORD_API_URL": dc.APIURL(),
		"MARLOWE_MODEL_PROVIDER":  "openai",
		"MARLOWE_MODEL":           "fake-model",
		"MARLOWE_MODEL_BASE_URL":  model.URL,
	})
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
		case <-time.After(15 * time.Second):
			t.Error("serve did not stop")
		}
	}
	t.Cleanup(stop)
	if !dc.WaitConnected(10 * time.Second) {
		t.Fatalf("the bot never connected to the fake gateway:\n%s", logs.String())
	}
	if strings.Contains(logs.String(), "sandbox ready") {
		t.Fatal("the sandbox started although Discord is configured")
	}
	mention := "<@" + dc.Bot().ID + ">"
	waitPost := func(what string, match func(discordfake.Message) bool) discordfake.Message {
		t.Helper()
		var found discordfake.Message
		if !dc.Wait(10*time.Second, func() bool {
			for _, p := range dc.PostsLocked() {
				if match(p) {
					found = p
					return true
				}
			}
			return false
		}) {
			t.Fatalf("no post for %s; posts: %+v\nlogs:\n%s", what, dc.Posts(), logs.String())
		}
		return found
	}
	count := func(match func(discordfake.Message) bool) int {
		n := 0
		for _, p := range dc.Posts() {
			if match(p) {
				n++
			}
		}
		return n
	}

	// 1. A mention is answered in a thread started on it.
	model.Enqueue(llmtest.Text("Signups last week: 412, up 9%."))
	root := dc.Say(discordfake.Msg{Channel: general, Author: alice, Content: mention + " pull last week's signups"})
	answer := waitPost("the answer", func(p discordfake.Message) bool { return strings.Contains(p.Content, "412") })
	if answer.ChannelID != root {
		t.Fatalf("answer posted in %s, want the thread on %s", answer.ChannelID, root)
	}
	if th := dc.Threads(); len(th) != 1 || th[0] != root {
		t.Fatalf("threads %v", th)
	}

	// 2. Chatter at the top level from someone else stays unanswered.
	dc.Say(discordfake.Msg{Channel: general, Author: carol, Content: "lunch anyone?"})

	// 3. An untagged follow-up in the thread is answered there.
	model.Enqueue(llmtest.Text("By region: EMEA 180, AMER 150, APAC 82."))
	dc.Say(discordfake.Msg{Channel: root, Author: bob, Content: "break that down by region?"})
	follow := waitPost("the follow-up answer", func(p discordfake.Message) bool { return strings.Contains(p.Content, "EMEA 180") })
	if follow.ChannelID != root {
		t.Fatalf("follow-up answered in %s, want the thread %s", follow.ChannelID, root)
	}

	// 4. Posting to a channel the person never named needs approval: a card
	// with buttons; a forged click is refused to the clicker alone; Alice
	// approves and only then the post happens.
	model.Enqueue(
		llmtest.Tools(llmtest.Call("call-1", "post_to_channel", `{"channel":"`+ops+`","text":"Signups report: 412"}`)),
		llmtest.Text("Shared the report in ops."),
	)
	dc.Say(discordfake.Msg{Channel: root, Author: alice, Content: "share the numbers with the ops room"})
	card := waitPost("the approval card", func(p discordfake.Message) bool { return len(p.Components) > 0 })
	if n := count(func(p discordfake.Message) bool { return p.ChannelID == ops }); n != 0 {
		t.Fatalf("posted to %s before approval", ops)
	}
	approve := buttonWithAction(t, card.Components, 'a')

	forged := approve[:len(approve)-3] + "xyz"
	fid := dc.Click(discordfake.Click{Channel: root, MessageID: card.ID, CustomID: forged, User: bob})
	if !dc.Wait(10*time.Second, func() bool {
		for _, f := range dc.FollowupsLocked() {
			if f.InteractionID == fid {
				return true
			}
		}
		return false
	}) {
		t.Fatalf("no ephemeral refusal of the forged click; callbacks %+v\nlogs:\n%s", dc.Callbacks(), logs.String())
	}
	for _, f := range dc.Followups() {
		if f.InteractionID == fid && (f.Flags&64 == 0 || !strings.Contains(f.Content, "nothing was done")) {
			t.Fatalf("forged-click refusal %+v, want ephemeral", f)
		}
	}

	cid := dc.Click(discordfake.Click{Channel: root, MessageID: card.ID, CustomID: approve, User: alice})
	waitPost("the approved post", func(p discordfake.Message) bool { return p.ChannelID == ops && strings.Contains(p.Content, "412") })
	waitPost("the run's final answer", func(p discordfake.Message) bool { return strings.Contains(p.Content, "Shared the report") })
	for _, cb := range dc.Callbacks() {
		if cb.Latency > 3*time.Second {
			t.Fatalf("interaction %s acknowledged after %v", cb.InteractionID, cb.Latency)
		}
		if cb.InteractionID == cid && cb.Type != 6 {
			t.Fatalf("approval click answered with type %d, want 6", cb.Type)
		}
	}
	// The card shows the decision in place, without buttons.
	if !dc.Wait(10*time.Second, func() bool {
		for _, e := range dc.EditsLocked() {
			if e.MessageID == card.ID && strings.Contains(strings.ToLower(e.Content), "approved") && (len(e.Components) == 0 || string(e.Components) == "[]") {
				return true
			}
		}
		return false
	}) {
		t.Fatalf("card not resolved in place: edits %+v", dc.Edits())
	}

	// A replayed click is refused: nothing posts twice.
	dc.Click(discordfake.Click{Channel: root, MessageID: card.ID, CustomID: approve, User: alice})
	waitPost("the already-decided notice", func(p discordfake.Message) bool { return strings.Contains(p.Content, "already decided") })
	if n := count(func(p discordfake.Message) bool { return p.ChannelID == ops }); n != 1 {
		t.Fatalf("%d posts in %s, want exactly 1", n, ops)
	}
	if n := count(func(p discordfake.Message) bool { return p.ChannelID == general }); n != 0 {
		t.Fatalf("the bot posted at the top level of general %d times", n)
	}
	if n := count(func(p discordfake.Message) bool { return strings.Contains(p.Content, "412, up 9%") }); n != 1 {
		t.Fatalf("the first answer was posted %d times", n)
	}
	if strings.Contains(logs.String(), "lunch anyone") {
		t.Fatal("ignored chatter reached the logs")
	}

	// The answers' latency from the message's arrival, the pacing waits by
	// route and the dropped decorations, for Discord (issue 38).
	m := readyRE.FindStringSubmatch(logs.String())
	if m == nil {
		t.Fatalf("no ready address in the logs:\n%s", logs.String())
	}
	metrics := scrape(t, m[1])
	for _, k := range []string{
		`marlowe_answer_seconds_count{platform="discord"}`,
		`marlowe_pacing_wait_seconds_count{method="create message",platform="discord"}`,
		`marlowe_pacing_wait_seconds_count{method="reactions",platform="discord"}`,
	} {
		if metrics[k] < 1 {
			t.Errorf("%s = %v, want at least 1", k, metrics[k])
		}
	}
	if _, ok := metrics[`marlowe_outbound_decorations_dropped_total{platform="discord"}`]; !ok {
		t.Error(`marlowe_outbound_decorations_dropped_total{platform="discord"} missing`)
	}

	// The journal verifies; the chatter was never journaled.
	stop()
	if out, err := runBot(t, env(map[string]string{"MARLOWE_DATA_DIR": dir}), "", "verify"); err != nil {
		t.Fatalf("verify: %v %s", err, out)
	}
	out, err := runBot(t, env(map[string]string{"MARLOWE_DATA_DIR": dir}), "", "replay", "--channel", "discord/"+guild+"/"+general)
	if err != nil {
		t.Fatal(err)
	}
	var st fold.ChannelState
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatal(err)
	}
	if st.Counts["message.received"] != 3 {
		t.Fatalf("journaled %d messages, want 3 (the chatter and the bot's echoes must not be)", st.Counts["message.received"])
	}
	for id, r := range st.Runs {
		if r.Status != core.RunDone {
			t.Errorf("run %s is %s", id, r.Status)
		}
	}
}

// buttonWithAction finds the custom_id of the button whose card token has
// the given action ("<approval>.<action><mac>").
func buttonWithAction(t *testing.T, comps json.RawMessage, action byte) string {
	t.Helper()
	var rows []struct {
		Components []struct {
			CustomID string `json:"custom_id"`
		}
	}
	if err := json.Unmarshal(comps, &rows); err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		for _, b := range r.Components {
			if i := strings.LastIndexByte(b.CustomID, '.'); i > 0 && i+1 < len(b.CustomID) && b.CustomID[i+1] == action {
				return b.CustomID
			}
		}
	}
	t.Fatalf("no button with action %q in %s", action, comps)
	return ""
}
