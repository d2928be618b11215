package main

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/adapters/slack/slackfake"
	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/fold"
	"github.com/marlowe-bot/marlowe/llm/llmtest"
)

// TestServeSlackAndOpenAIModel runs the composition root as a user would
// configure it: Slack Socket Mode against a local fake Slack, an
// OpenAI-compatible model against a local fake, the embedded SQLite store.
func TestServeSlackAndOpenAIModel(t *testing.T) {
	const (
		general = "C0GENERAL1"
		ops     = "C0OPSROOM1"
		alice   = "U0ALICE001"
		bob     = "U0BOB00001"
		carol   = "U0CAROL001"
	)
	slack := slackfake.New(slackfake.Config{EchoPosts: true, Channels: map[string]string{general: "channel", ops: "channel"}})
	t.Cleanup(slack.Close)
	model := llmtest.NewOpenAIServer(t)
	dir := t.TempDir()
	getenv := env(map[string]string{
		"MARLOWE_DATA_DIR":       dir,
		"MARLOWE_HTTP_ADDR":      "127.0.0.1:0",
		"SLACK_BOT_TOKEN":        "xoxb-test-token",
		"SLACK_APP_TOKEN":        "xapp-test-token",
		"MARLOWE_SLACK_API_URL":  slack.APIURL(),
		"MARLOWE_MODEL_PROVIDER": "openai",
		"MARLOWE_MODEL":          "fake-model",
		"MARLOWE_MODEL_BASE_URL": model.URL,
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
	if !slack.WaitConnected(10 * time.Second) {
		t.Fatalf("the bot never opened a Socket Mode connection:\n%s", logs.String())
	}
	mention := "<@" + slack.Config().BotUserID + ">"

	waitPost := func(what string, match func(slackfake.Post) bool) slackfake.Post {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			for _, p := range slack.Posts() {
				if match(p) {
					return p
				}
			}
		}
		t.Fatalf("no post for %s; posts: %+v\nlogs:\n%s", what, slack.Posts(), logs.String())
		return slackfake.Post{}
	}
	countPosts := func(match func(slackfake.Post) bool) int {
		n := 0
		for _, p := range slack.Posts() {
			if match(p) {
				n++
			}
		}
		return n
	}

	// 1. A mention (delivered twice by Slack) is answered once, in its thread.
	model.Enqueue(llmtest.Text("Signups last week: 412, up 9%."))
	root, _ := slack.Say(general, "", alice, mention+" pull last week's signups")
	answer := waitPost("the answer", func(p slackfake.Post) bool { return strings.Contains(p.Text, "412") })
	if answer.ThreadTS != root || answer.Channel != general {
		t.Fatalf("answer posted in %s/%q, want thread %s", answer.Channel, answer.ThreadTS, root)
	}

	// 2. Chatter at the top level from someone else stays unanswered.
	slack.Say(general, "", carol, "lunch anyone?")

	// 3. An untagged follow-up in the thread is answered.
	model.Enqueue(llmtest.Text("By region: EMEA 180, AMER 150, APAC 82."))
	slack.Say(general, root, bob, "break that down by region?")
	follow := waitPost("the follow-up answer", func(p slackfake.Post) bool { return strings.Contains(p.Text, "EMEA 180") })
	if follow.ThreadTS != root {
		t.Fatalf("follow-up answered in thread %q, want %s", follow.ThreadTS, root)
	}
	// The follow-up's run knew what "that" was: the thread so far was in
	// the model's request.
	reqs, err := model.ChatRequests()
	if err != nil || len(reqs) < 2 {
		t.Fatalf("chat requests: %d, %v", len(reqs), err)
	}
	if body, _ := json.Marshal(reqs[1].Messages); !strings.Contains(string(body), "pull last week's signups") || !strings.Contains(string(body), "412, up 9%") {
		t.Fatalf("the follow-up's request lacks the thread so far: %s", body)
	}

	// 4. Posting to a channel the person never named needs approval: a card
	// with buttons; Alice approves and only then the post happens.
	model.Enqueue(
		llmtest.Tools(llmtest.Call("call-1", "post_to_channel", `{"channel":"`+ops+`","text":"Signups report: 412"}`)),
		llmtest.Text("Shared the report in ops."),
	)
	slack.Say(general, root, alice, "share the numbers with the ops room")
	card := waitPost("the approval card", func(p slackfake.Post) bool { return len(p.Blocks) > 0 && strings.Contains(string(p.Blocks), "approve") })
	if n := countPosts(func(p slackfake.Post) bool { return p.Channel == ops }); n != 0 {
		t.Fatalf("posted to %s before approval", ops)
	}
	actionID, value := approveButton(t, card.Blocks)
	slack.PushInteraction(slack.BlockActionsJSON(slackfake.Click{
		Channel: general, MessageTS: card.TS, ThreadTS: root, User: alice, UserName: "alice",
		ActionID: actionID, Value: value, Label: "Approve",
	}))
	waitPost("the approved post", func(p slackfake.Post) bool { return p.Channel == ops && strings.Contains(p.Text, "412") })
	waitPost("the run's final answer", func(p slackfake.Post) bool { return strings.Contains(p.Text, "Shared the report") })

	// A replayed click is refused: nothing posts twice.
	slack.PushInteraction(slack.BlockActionsJSON(slackfake.Click{
		Channel: general, MessageTS: card.TS, ThreadTS: root, User: alice, UserName: "alice",
		ActionID: actionID, Value: value, Label: "Approve",
	}))
	time.Sleep(500 * time.Millisecond)
	if n := countPosts(func(p slackfake.Post) bool { return p.Channel == ops }); n != 1 {
		t.Fatalf("%d posts in %s, want exactly 1", n, ops)
	}
	for _, p := range slack.Posts() {
		if p.ThreadTS == "" && p.Channel == general {
			t.Fatalf("the bot posted at the top level of %s: %q", general, p.Text)
		}
	}
	if n := countPosts(func(p slackfake.Post) bool { return strings.Contains(p.Text, "412, up 9%") }); n != 1 {
		t.Fatalf("the first answer was posted %d times", n)
	}
	if strings.Contains(logs.String(), "lunch anyone") {
		t.Fatal("ignored chatter reached the logs")
	}

	// The journal verifies and replays to finished runs.
	stop()
	out, err := runBot(t, env(map[string]string{"MARLOWE_DATA_DIR": dir}), "", "verify")
	if err != nil {
		t.Fatalf("verify: %v %s", err, out)
	}
	out, err = runBot(t, env(map[string]string{"MARLOWE_DATA_DIR": dir}), "", "replay", "--channel", "slack/"+slack.Config().TeamID+"/"+general)
	if err != nil {
		t.Fatal(err)
	}
	var st fold.ChannelState
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatal(err)
	}
	if st.Counts["message.received"] != 3 {
		t.Fatalf("journaled %d messages, want 3 (the chatter and the duplicate delivery must not be)", st.Counts["message.received"])
	}
	for id, r := range st.Runs {
		if r.Status != core.RunDone {
			t.Errorf("run %s is %s", id, r.Status)
		}
		// Replaying a finished run needs no model: the fake is not called.
		calls := len(model.Requests())
		out, err := runBot(t, env(map[string]string{"MARLOWE_DATA_DIR": dir}), "", "replay", "--run", id)
		if err != nil {
			t.Fatal(err)
		}
		var rr struct {
			ID     string
			Status core.RunStatus
			Steps  int
		}
		if err := json.Unmarshal([]byte(out), &rr); err != nil || rr.ID != id || rr.Status != core.RunDone || rr.Steps != r.Steps {
			t.Fatalf("replay --run %s = %+v (%v), fold says %+v", id, rr, err, r)
		}
		if len(model.Requests()) != calls {
			t.Fatal("replaying a run called the model")
		}
	}
}

// approveButton finds the approve button's action id and value in a card.
func approveButton(t *testing.T, blocks json.RawMessage) (actionID, value string) {
	t.Helper()
	var bs []struct {
		Type     string
		Elements []struct {
			Type     string
			ActionID string `json:"action_id"`
			Value    string
		}
	}
	if err := json.Unmarshal(blocks, &bs); err != nil {
		t.Fatal(err)
	}
	for _, b := range bs {
		for _, e := range b.Elements {
			if e.Type == "button" && strings.Contains(e.ActionID, "approve") {
				return e.ActionID, e.Value
			}
		}
	}
	t.Fatalf("no approve button in %s", blocks)
	return "", ""
}
