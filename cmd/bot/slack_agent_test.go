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

const agentGeneral, agentRandom, agentOps = "C0GENERAL1", "C0RANDOM01", "C0OPSROOM1"

// agentScript is the default run: plan + read_thread, progress + a note
// to #random (named in the prompt, so no approval), the long answer.
func agentScript() []llmtest.Response {
	return []llmtest.Response{
		llmtest.Tools(
			llmtest.Call("call_plan", "update_checklist", `{"items":[{"text":"Read the thread"},{"text":"Post a note to #random"},{"text":"Answer"}]}`),
			llmtest.Call("call_read", "read_thread", `{}`),
			llmtest.Call("call_bogus", "no_such_tool", `{}`),
		),
		llmtest.Tools(
			llmtest.Call("call_progress", "update_checklist", `{"items":[{"text":"Read the thread","done":true},{"text":"Post a note to #random"},{"text":"Answer"}]}`),
			llmtest.Call("call_note", "post_to_channel", `{"channel":"`+agentRandom+`","text":"A note from the thread"}`),
		),
		llmtest.Text(agentAnswer("K-agent")),
	}
}

// thinkingFirst holds the model's first answer until the thread shows "is
// thinking…". The indicator is a decoration asked for beside the model
// call, never before it (it must not delay the answer), so on a loaded
// machine a fake model that answers at once could finish first, and a run
// that short shows none, by design.
func thinkingFirst(slack *slackfake.Server, script []llmtest.Response) {
	script[0].Until = slack.StatusSet("is thinking…")
}

// agentServe runs `bot serve` in-process against fake Slack (granting
// scopes) and a scripted OpenAI model, and says one mention in #general.
func agentServe(t *testing.T, scopes []string) (*slackfake.Server, string, *syncBuffer) {
	return agentServeScript(t, scopes, nil, agentScript()...)
}

// agentServeScript is agentServe with the model's script; prep, when set,
// scripts the fake before the mention is said.
func agentServeScript(t *testing.T, scopes []string, prep func(*slackfake.Server), script ...llmtest.Response) (*slackfake.Server, string, *syncBuffer) {
	t.Helper()
	const general, random, alice = agentGeneral, agentRandom, "U0ALICE001"
	slack := slackfake.New(slackfake.Config{EchoPosts: true, Scopes: scopes, Channels: map[string]string{general: "channel", random: "channel", agentOps: "channel"}})
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
	if prep != nil {
		prep(slack)
	}
	model.Enqueue(script...)
	root, _ := slack.Say(general, "", alice, "<@"+slack.Config().BotUserID+"> please read this thread, post a note to <#"+random+"> and answer")
	return slack, root, logs
}

// With assistant:write the run is one streamed message: its plan and
// tasks follow the run's steps, the answer streams into it in several
// paced appends, the thread shows "is thinking…" while the run works and
// is cleared at the end, and no checklist or answer is posted as a
// chat.postMessage.
func TestSlackAgentSurfaceStreamsPlanTasksAndAnswer(t *testing.T) {
	script := agentScript()
	slack, root, logs := agentServeScript(t, append(slackad.RequiredScopes(), slackad.AgentScope),
		func(f *slackfake.Server) { thinkingFirst(f, script) }, script...)
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
	// Tasks followed the steps: while the run worked (before the stop) a
	// plan item was still pending and the read already complete. (Queued
	// task updates of one stream coalesce, so which intermediate states
	// went out depends on the pace; the latest always does.)
	var sawPending, sawReadEarly bool
	for _, c := range st.Calls[:len(st.Calls)-1] {
		sawPending = sawPending || hasTask(c.Chunks, "plan-1", "pending")
		sawReadEarly = sawReadEarly || hasTask(c.Chunks, "call-call_read", "complete")
	}
	if !sawPending || !sawReadEarly {
		t.Errorf("tasks did not follow the steps (pending plan item seen %v, read complete before the end %v): %+v", sawPending, sawReadEarly, st.Calls)
	}
	wantTasks := map[string]string{"plan-0": "complete", "plan-1": "complete", "plan-2": "complete",
		"call-call_read": "complete", "call-call_bogus": "error", "call-call_note": "complete"}
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
	// Status: thinking while it worked, cleared once the stream stopped.
	waitCleared(t, slack, root, true)
}

// waitCleared waits until the thread's last status is the cleared one
// (it is set right after the stop), having been "is thinking…" before
// when thought is set.
func waitCleared(t *testing.T, slack *slackfake.Server, root string, thought bool) {
	t.Helper()
	var statuses []string
	waitFor(t, 10*time.Second, func() bool {
		statuses = nil
		for _, s := range slack.Statuses() {
			if s.ThreadTS == root {
				statuses = append(statuses, s.Status)
			}
		}
		return len(statuses) > 0 && statuses[len(statuses)-1] == ""
	}, func() string { return fmt.Sprintf("thread statuses %q: want cleared last", statuses) })
	if thought && !slices.Contains(statuses, "is thinking…") {
		t.Errorf("thread statuses %q: never \"is thinking…\"", statuses)
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

// agentStream waits for the thread's one stream to satisfy ok.
func agentStream(t *testing.T, slack *slackfake.Server, root string, logs *syncBuffer, what string, ok func(slackfake.Stream) bool) slackfake.Stream {
	t.Helper()
	var st slackfake.Stream
	waitFor(t, 20*time.Second, func() bool {
		for _, s := range slack.Streams() {
			if s.ThreadTS == root && ok(s) {
				st = s
				return true
			}
		}
		return false
	}, func() string {
		return fmt.Sprintf("no stream %s; streams %+v\n%s", what, slack.Streams(), logs.String())
	})
	return st
}

// A model failure after the stream started stops it with a visible failed
// plan (the done step complete, the rest not), the failure notice is
// posted as before, and the thread's status is cleared.
func TestSlackAgentModelFailureEndsTheStreamFailed(t *testing.T) {
	script := []llmtest.Response{agentScript()[0], llmtest.Error(401, "invalid api key")}
	slack, root, logs := agentServeScript(t, append(slackad.RequiredScopes(), slackad.AgentScope),
		func(f *slackfake.Server) { thinkingFirst(f, script) }, script...)
	st := agentStream(t, slack, root, logs, "stopped", func(s slackfake.Stream) bool { return s.Stopped })
	if !strings.HasPrefix(st.Plan, "❌ Failed") {
		t.Errorf("the stopped stream's plan says %q, want the failure", st.Plan)
	}
	status := map[string]string{}
	for _, task := range st.Tasks {
		status[task.ID] = task.Status
	}
	if status["call-call_read"] != "complete" || status["plan-0"] != "pending" {
		t.Errorf("tasks %+v: want the read complete and the plan not done", st.Tasks)
	}
	if st.Text != "" {
		t.Errorf("a failed run streamed text %q", st.Text)
	}
	waitFor(t, 10*time.Second, func() bool {
		for _, p := range slack.Posts() {
			if p.ThreadTS == root && strings.HasPrefix(p.Text, "❌ I couldn't finish this") {
				return true
			}
		}
		return false
	}, func() string { return fmt.Sprintf("no failure notice; posts %+v", slack.Posts()) })
	waitCleared(t, slack, root, true)
}

// A tool that needs approval: the card is a Block Kit message, the stream
// stays open with the tool's task in progress, waiting; once approved the
// run streams its answer into the same stream and stops it.
func TestSlackAgentApprovalKeepsTheStreamOpen(t *testing.T) {
	slack, root, logs := agentServeScript(t, append(slackad.RequiredScopes(), slackad.AgentScope), nil,
		llmtest.Tools(llmtest.Call("call_ops", "post_to_channel", `{"channel":"`+agentOps+`","text":"Signups report: 412"}`)),
		llmtest.Text("Shared the report in ops."))
	var card slackfake.Post
	waitFor(t, 20*time.Second, func() bool {
		for _, p := range slack.Posts() {
			if p.ThreadTS == root && len(p.Blocks) > 0 && strings.Contains(string(p.Blocks), "approve") {
				card = p
				return true
			}
		}
		return false
	}, func() string { return fmt.Sprintf("no approval card; posts %+v\n%s", slack.Posts(), logs.String()) })
	st := agentStream(t, slack, root, logs, "waiting for approval", func(s slackfake.Stream) bool {
		return slices.ContainsFunc(s.Tasks, func(task slackfake.Task) bool {
			return task.ID == "call-call_ops" && task.Status == "in_progress" && task.Output == "waiting for approval"
		})
	})
	if st.Stopped {
		t.Fatal("the stream stopped while the run waits for approval")
	}
	actionID, value := approveButton(t, card.Blocks)
	slack.PushInteraction(slack.BlockActionsJSON(slackfake.Click{
		Channel: agentGeneral, MessageTS: card.TS, ThreadTS: root, User: "U0ALICE001", UserName: "alice",
		ActionID: actionID, Value: value, Label: "Approve",
	}))
	st = agentStream(t, slack, root, logs, "stopped after approval", func(s slackfake.Stream) bool { return s.Stopped })
	if st.Text != "Shared the report in ops." || st.Plan != "✅ Done" {
		t.Fatalf("stream text %q plan %q after approval", st.Text, st.Plan)
	}
	if n := len(slack.Streams()); n != 1 {
		t.Fatalf("%d streams, want 1", n)
	}
}

// A stream Slack has already closed (message_not_in_streaming_state) does
// not lose the answer: it is posted as an ordinary message, once.
func TestSlackAgentClosedStreamPostsTheAnswer(t *testing.T) {
	slack, root, logs := agentServeScript(t, append(slackad.RequiredScopes(), slackad.AgentScope), func(f *slackfake.Server) {
		f.FailCalls("chat.appendStream", 100, "message_not_in_streaming_state")
	}, llmtest.Text("Signups: 412."))
	waitFor(t, 20*time.Second, func() bool {
		for _, p := range slack.Posts() {
			if p.ThreadTS == root && p.Text == "Signups: 412." {
				return true
			}
		}
		return false
	}, func() string {
		return fmt.Sprintf("the answer was not posted; posts %+v calls %+v streams %+v\n%s", slack.Posts(), slack.Calls(), slack.Streams(), logs.String())
	})
	if n := slack.CallCount("chat.startStream"); n != 1 {
		t.Errorf("%d chat.startStream calls, want 1", n)
	}
	if strings.Contains(logs.String(), "level=ERROR") {
		t.Errorf("errors logged:\n%s", logs.String())
	}
}
