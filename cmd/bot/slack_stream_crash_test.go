package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	slackad "github.com/marlowe-bot/marlowe/adapters/slack"
	"github.com/marlowe-bot/marlowe/adapters/slack/slackfake"
	"github.com/marlowe-bot/marlowe/llm/llmtest"
)

// TestSlackStreamKillAtEveryStep is the crash contract for a streamed run
// on the real binary against fake Slack with the agent surface: a run
// (plan + read_thread, a progress update, a long answer streamed in
// paced pieces) is SIGKILLed after each journal append, a little after
// each, and at several points while its answer streams (nothing is
// journaled then). Restarted on the same data dir, the bot must finish
// the run with exactly one message in the thread — one stream, stopped,
// holding the whole answer once, its plan done — and no chat.postMessage
// of the answer, the journal as in an uninterrupted run. The same again
// for a plain run (no tool steps), whose answer streams on its own.
func TestSlackStreamKillAtEveryStep(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the bot binary and SIGKILLs it at every step of a streamed run (-short skips it)")
	}
	// Parallel: about 60 restarts, each mostly waiting on paced pieces;
	// every kill point is checked for the same end state, so load that
	// shifts where a kill lands changes nothing asserted.
	t.Parallel()
	start := time.Now()
	bin := buildCrashBot(t)
	model := newStreamModel(t)

	for _, plain := range []bool{false, true} {
		t.Run(map[bool]string{false: "plan", true: "plain"}[plain], func(t *testing.T) {
			t.Parallel()
			streamKillLoop(t, bin, model.URL, plain)
		})
	}
	t.Cleanup(func() { t.Logf("took %s", time.Since(start).Round(100*time.Millisecond)) })
}

func streamKillLoop(t *testing.T, bin, modelURL string, plain bool) {
	clean := newStreamBot(t, bin, modelURL, "clean")
	clean.plain = plain
	clean.b.start()
	clean.say()
	clean.b.waitRunEnd(30 * time.Second)
	clean.b.interrupt()
	want := clean.check()
	total := clean.b.count()
	kinds := clean.b.kinds()
	final := 0 // journal length once the final model.step is in
	for i, k := range kinds {
		if k == "model.step" {
			final = i + 1
		}
	}
	t.Logf("clean run: %d commands: %s", total, strings.Join(kinds, " "))

	type kill struct {
		n     int
		delay time.Duration
	}
	var kills []kill
	for _, delay := range []time.Duration{0, 3 * crashStep} {
		for n := 0; n <= total; n++ {
			kills = append(kills, kill{n, delay})
		}
	}
	// The answer streams in three pieces a second apart after the final
	// step: kill inside that stretch, where the journal does not move.
	for _, d := range []time.Duration{200 * time.Millisecond, 700 * time.Millisecond, 1300 * time.Millisecond, 1900 * time.Millisecond, 2300 * time.Millisecond} {
		kills = append(kills, kill{final, d})
	}
	var midStream int
	for i, k := range kills {
		sb := newStreamBot(t, bin, modelURL, fmt.Sprintf("k%d", i))
		sb.plain = plain
		sb.b.start()
		at, text := sb.killAt(k.n, k.delay)
		if text != "" && text != agentAnswer(sb.b.token) {
			midStream++
		}
		sb.b.start()
		sb.b.waitRunEnd(40 * time.Second)
		sb.b.interrupt()
		got := sb.check()
		if !maps.Equal(got, want) {
			t.Errorf("killed after %d+%s (died at %d): journal kinds %v, want those of the clean run %v", k.n, k.delay, at, got, want)
		}
		sb.b.verify()
		if strings.Contains(sb.b.logs.String(), "level=ERROR") {
			t.Errorf("killed after %d+%s: the bot logged errors", k.n, k.delay)
		}
		if t.Failed() {
			t.Fatalf("killed after %d+%s (died at %d): bot logs:\n%s", k.n, k.delay, at, sb.b.logs.String())
		}
		sb.b.close()
		sb.slack.Close()
	}
	t.Logf("%d kills, %d of them with the answer part-streamed", len(kills), midStream)
	if midStream == 0 {
		t.Error("no kill landed while the answer was streaming")
	}
}

// streamBot is a crashBot on Slack: the fake outlives the bot's restarts.
type streamBot struct {
	b     *crashBot
	slack *slackfake.Server
	root  string
	plain bool // a run without tool steps: the answer streams on its own
}

const streamChannel, streamAlice = "C0GENERAL1", "U0ALICE001"

func newStreamBot(t *testing.T, bin, modelURL, name string) *streamBot {
	t.Helper()
	slack := slackfake.New(slackfake.Config{
		RedeliverAfter: 300 * time.Millisecond, MaxRetries: 10,
		Scopes:   append(slackad.RequiredScopes(), slackad.AgentScope),
		Channels: map[string]string{streamChannel: "channel"},
	})
	t.Cleanup(slack.Close)
	b := newCrashBot(t, bin, modelURL, name)
	// The sandbox runs alongside: start() waits for it to be ready.
	b.env = append(b.env, "MARLOWE_SANDBOX=1", "SLACK_BOT_TOKEN=xoxb-test-token", "SLACK_APP_TOKEN=xapp-test-token",
		"MARLOWE_SLACK_API_URL="+slack.APIURL())
	return &streamBot{b: b, slack: slack}
}

func (s *streamBot) say() {
	ask := "read this thread and answer with the code "
	if s.plain {
		ask = "just answer with the code "
	}
	s.root, _ = s.slack.Say(streamChannel, "", streamAlice, "<@"+s.slack.Config().BotUserID+"> "+ask+s.b.token)
}

// killAt SIGKILLs the bot once the journal holds n commands (n = 0: as
// soon as the mention is said), after delay more, single-stepping it as
// crashBot.killAt does. It returns the journal length at death and the
// text the stream held then.
func (s *streamBot) killAt(n int, delay time.Duration) (int, string) {
	b := s.b
	b.t.Helper()
	p := b.cmd.Process
	s.say()
	deadline := time.Now().Add(30 * time.Second)
	for n > 0 {
		_ = p.Signal(syscall.SIGSTOP)
		var c int
		if b.journal().QueryRow(`SELECT count(*) FROM commands`).Scan(&c) == nil && c >= n {
			break
		}
		if time.Now().After(deadline) {
			_ = p.Signal(syscall.SIGCONT)
			b.t.Fatalf("the journal never reached %d commands:\n%s", n, b.logs.String())
		}
		_ = p.Signal(syscall.SIGCONT)
		time.Sleep(crashStep)
	}
	if delay > 0 {
		_ = p.Signal(syscall.SIGCONT)
		time.Sleep(delay)
	}
	b.kill()
	text := ""
	for _, st := range s.slack.Streams() {
		if st.ThreadTS == s.root {
			text = st.Text
		}
	}
	return b.count(), text
}

// check asserts the outcome on the fake and returns the journal's kinds.
func (s *streamBot) check() map[string]int {
	t := s.b.t
	t.Helper()
	var streams []slackfake.Stream
	for _, st := range s.slack.Streams() {
		if st.ThreadTS == s.root {
			streams = append(streams, st)
		}
	}
	if len(streams) != 1 {
		t.Errorf("%d streams in the thread, want exactly 1: %+v; posts %+v", len(streams), streams, s.slack.Posts())
		return nil
	}
	st := streams[0]
	if !st.Stopped {
		t.Errorf("the stream was left open")
	}
	if want := agentAnswer(s.b.token); st.Text != want {
		t.Errorf("the stream holds %q, want the answer once: %q", st.Text, want)
	}
	if want := map[bool]string{false: "✅ Done", true: ""}[s.plain]; st.Plan != want {
		t.Errorf("the stream's plan says %q, want %q", st.Plan, want)
	}
	for _, task := range st.Tasks {
		if task.Status != "complete" {
			t.Errorf("task %+v is not complete", task)
		}
	}
	for _, p := range s.slack.Posts() {
		if p.ThreadTS == s.root {
			t.Errorf("the bot posted %q in the thread besides the stream", p.Text)
		}
	}
	counts := map[string]int{}
	for _, k := range s.b.kinds() {
		counts[k]++
	}
	want := map[string]int{"message.received": 1, "run.started": 1, "run.completed": 1, "model.step": 3, "message.posted": 2}
	if s.plain {
		want["model.step"], want["message.posted"] = 1, 1
	}
	for kind, n := range want {
		if counts[kind] != n {
			t.Errorf("journal has %d %s, want %d (all: %v)", counts[kind], kind, n, counts)
		}
	}
	return counts
}

// newStreamModel answers as a pure function of the request: the plan and
// read_thread, then a progress update, then the long answer with the
// prompt's token.
func newStreamModel(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req llmtest.OpenAIChatRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, `{"error":{"message":"bad json"}}`, http.StatusBadRequest)
			return
		}
		token, results := crashRequest(req)
		msg := map[string]any{"role": "assistant", "content": nil}
		finish := "tool_calls"
		call := func(id, name, args string) map[string]any {
			return map[string]any{"id": id, "type": "function", "function": map[string]any{"name": name, "arguments": args}}
		}
		plain := false
		for _, m := range req.Messages {
			plain = plain || m.Role == "user" && strings.Contains(m.Text(), "just answer")
		}
		switch {
		case plain:
			msg["content"], finish = agentAnswer(token), "stop"
		case results == 0:
			msg["tool_calls"] = []map[string]any{
				call("call_plan", "update_checklist", `{"items":[{"text":"Read the thread"},{"text":"Answer"}]}`),
				call("call_read", "read_thread", `{}`),
			}
		case results == 2:
			msg["tool_calls"] = []map[string]any{call("call_progress", "update_checklist", `{"items":[{"text":"Read the thread","done":true},{"text":"Answer"}]}`)}
		default:
			msg["content"], finish = agentAnswer(token), "stop"
		}
		writeCompletion(w, req.Model, msg, finish)
	}))
	t.Cleanup(srv.Close)
	srv.URL += "/v1"
	return srv
}
