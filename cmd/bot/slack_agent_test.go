package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	slackad "github.com/marlowe-bot/marlowe/adapters/slack"
	"github.com/marlowe-bot/marlowe/adapters/slack/slackfake"
	"github.com/marlowe-bot/marlowe/llm/llmtest"
)

// agentAnswer is a long final answer: it streams in several appends.
func agentAnswer(token string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Done: the code is %s.", token)
	for i := 1; i <= 12; i++ {
		fmt.Fprintf(&b, " Finding %d: the thread agrees on step %d and the note went out to the other room as asked.", i, i)
	}
	return b.String()
}

// agentServe runs `bot serve` in-process against fake Slack (granting
// scopes) and a scripted OpenAI model, and says one mention in #general.
func agentServe(t *testing.T, scopes []string) (*slackfake.Server, string, *syncBuffer) {
	t.Helper()
	const general, random, alice = "C0GENERAL1", "C0RANDOM01", "U0ALICE001"
	slack := slackfake.New(slackfake.Config{EchoPosts: true, Scopes: scopes, Channels: map[string]string{general: "channel", random: "channel"}})
	t.Cleanup(slack.Close)
	model := llmtest.NewOpenAIServer(t)
	getenv := env(map[string]string{
		"MARLOWE_DATA_DIR":       t.TempDir(),
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
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("serve returned %v", err)
			}
		case <-time.After(15 * time.Second):
			t.Error("serve did not stop")
		}
	})
	if !slack.WaitConnected(10 * time.Second) {
		t.Fatalf("no Socket Mode connection:\n%s", logs.String())
	}
	model.Enqueue(
		llmtest.Tools(
			llmtest.Call("call_plan", "update_checklist", `{"items":[{"text":"Read the thread"},{"text":"Post a note to #random"},{"text":"Answer"}]}`),
			llmtest.Call("call_read", "read_thread", `{}`),
		),
		llmtest.Tools(
			llmtest.Call("call_progress", "update_checklist", `{"items":[{"text":"Read the thread","done":true},{"text":"Post a note to #random"},{"text":"Answer"}]}`),
			llmtest.Call("call_note", "post_to_channel", `{"channel":"`+random+`","text":"A note from the thread"}`),
		),
		llmtest.Text(agentAnswer("K-agent")),
	)
	root, _ := slack.Say(general, "", alice, "<@"+slack.Config().BotUserID+"> please read this thread, post a note to <#"+random+"> and answer")
	return slack, root, logs
}

// With assistant:write the run is one streamed message: its plan and
// tasks follow the run's steps, the answer streams into it in several
// paced appends, the thread shows "is thinking…" while the run works and
// is cleared at the end, and no checklist or answer is posted as a
// chat.postMessage.
func TestSlackAgentSurfaceStreamsPlanTasksAndAnswer(t *testing.T) {
	slack, root, logs := agentServe(t, append(slackad.RequiredScopes(), slackad.AgentScope))
	var st slackfake.Stream
	waitFor(t, 20*time.Second, func() bool {
		for _, s := range slack.Streams() {
			if s.ThreadTS == root && s.Stopped {
				st = s
				return true
			}
		}
		return false
	}, func() string {
		return fmt.Sprintf("no stopped stream in the thread; streams %+v\n%s", slack.Streams(), logs.String())
	})

	if n := len(slack.Streams()); n != 1 {
		t.Fatalf("%d streams, want 1", n)
	}
	if want := agentAnswer("K-agent"); st.Text != want {
		t.Fatalf("streamed text %q, want the answer %q", st.Text, want)
	}
	if st.RecipientUser != "U0ALICE001" || st.DisplayMode != "plan" {
		t.Errorf("stream recipient %q, display mode %q", st.RecipientUser, st.DisplayMode)
	}
	// The first call showed the plan working; the last stop shows it done.
	first := st.Calls[0]
	if first.Method != "chat.startStream" || !hasChunk(first.Chunks, "plan_update", "title", "⏳ Working on it…") {
		t.Errorf("first call %s %v, want chat.startStream with the working plan", first.Method, first.Chunks)
	}
	last := st.Calls[len(st.Calls)-1]
	if last.Method != "chat.stopStream" || !hasChunk(last.Chunks, "plan_update", "title", "✅ Done") {
		t.Errorf("last call %s %v, want chat.stopStream with the done plan", last.Method, last.Chunks)
	}
	// Tasks followed the steps: plan items pending, then done; the tool
	// steps appeared as they completed.
	var sawPending, sawReadBeforeNote bool
	for _, c := range st.Calls {
		if hasTask(c.Chunks, "plan-1", "pending") {
			sawPending = true
		}
		if hasTask(c.Chunks, "call-call_read", "complete") && !hasTask(c.Chunks, "call-call_note", "") {
			sawReadBeforeNote = true
		}
	}
	if !sawPending || !sawReadBeforeNote {
		t.Errorf("tasks did not follow the steps (pending plan item seen %v, read before note %v): %+v", sawPending, sawReadBeforeNote, st.Calls)
	}
	wantTasks := map[string]string{"plan-0": "complete", "plan-1": "complete", "plan-2": "complete", "call-call_read": "complete", "call-call_note": "complete"}
	got := map[string]string{}
	for _, task := range st.Tasks {
		got[task.ID] = task.Status
	}
	for id, status := range wantTasks {
		if got[id] != status {
			t.Errorf("task %s is %q, want %q (tasks %+v)", id, got[id], status, st.Tasks)
		}
	}
	// The answer streamed: several appends carried text, none over 400,
	// one per second (the channel's pace) however fast they could go.
	var texts int
	var prev time.Time
	for _, c := range st.Calls {
		if c.Text == "" {
			continue
		}
		texts++
		if len([]rune(c.Text)) > slackad.DefaultStreamChunkChars {
			t.Errorf("one append carried %d characters", len([]rune(c.Text)))
		}
		if gap := c.At.Sub(prev); !prev.IsZero() && gap < 900*time.Millisecond {
			t.Errorf("two pieces of the answer %s apart, want about a second", gap)
		}
		prev = c.At
	}
	if texts < 3 {
		t.Errorf("the answer came in %d appends, want several", texts)
	}
	for _, c := range slack.Calls() {
		if c.Status == 429 {
			t.Errorf("a call was rate limited: %+v", c)
		}
	}
	// Nothing of the run was posted the old way in the thread.
	for _, p := range slack.Posts() {
		if p.ThreadTS == root {
			t.Errorf("the bot posted %q in the thread with chat.postMessage", p.Text)
		}
	}
	if n := slack.CallCount("chat.update"); n != 0 {
		t.Errorf("%d chat.update calls, want none", n)
	}
	// Status: thinking while it worked, cleared at the end.
	var statuses []string
	for _, s := range slack.Statuses() {
		if s.ThreadTS == root {
			statuses = append(statuses, s.Status)
		}
	}
	if !slices.Contains(statuses, "is thinking…") || len(statuses) == 0 || statuses[len(statuses)-1] != "" {
		t.Errorf("thread statuses %q: want \"is thinking…\" and cleared last", statuses)
	}
}

// Without assistant:write the run is today's: a checklist edited in
// place and an answer posted, and no stream or status call at all.
func TestSlackWithoutAgentScopeKeepsTheChecklist(t *testing.T) {
	slack, root, logs := agentServe(t, slackad.RequiredScopes())
	answer := agentAnswer("K-agent")
	waitFor(t, 20*time.Second, func() bool {
		for _, p := range slack.Posts() {
			if p.ThreadTS == root && p.Text == answer {
				return true
			}
		}
		return false
	}, func() string { return fmt.Sprintf("no answer posted; posts %+v\n%s", slack.Posts(), logs.String()) })
	var checklist bool
	waitFor(t, 10*time.Second, func() bool {
		for _, u := range slack.Updates() {
			checklist = checklist || strings.HasPrefix(u.Text, "✅ Done\n☑ Read the thread")
		}
		return checklist
	}, func() string {
		return fmt.Sprintf("the checklist never showed the finished plan: %+v", slack.Updates())
	})
	for _, m := range []string{"chat.startStream", "chat.appendStream", "chat.stopStream", "assistant.threads.setStatus"} {
		if n := slack.CallCount(m); n != 0 {
			t.Errorf("%d %s calls without the scope", n, m)
		}
	}
}

func waitFor(t *testing.T, d time.Duration, ok func() bool, why func() string) {
	t.Helper()
	for deadline := time.Now().Add(d); !ok(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal(why())
		}
	}
}

func hasChunk(chunks []map[string]any, typ, key, value string) bool {
	for _, c := range chunks {
		if c["type"] == typ && c[key] == value {
			return true
		}
	}
	return false
}

// hasTask reports a task_update for id (with status, unless "").
func hasTask(chunks []map[string]any, id, status string) bool {
	for _, c := range chunks {
		if c["type"] == "task_update" && c["id"] == id && (status == "" || c["status"] == status) {
			return true
		}
	}
	return false
}
