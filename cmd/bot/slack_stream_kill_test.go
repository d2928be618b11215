package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	slackad "github.com/marlowe-bot/marlowe/adapters/slack"
	"github.com/marlowe-bot/marlowe/adapters/slack/slackfake"
	"github.com/marlowe-bot/marlowe/internal/testpg"
	"github.com/marlowe-bot/marlowe/internal/testredis"
	"github.com/marlowe-bot/marlowe/llm/llmtest"
)

// TestSlackStreamKilledWhileTheModelStreams is the newcomer's crash: the
// built binary, Slack's agent surface on, the model streaming its answer
// token by token (so chat.appendStream runs while the model still
// writes), SIGKILLed at several points of that stream. After a restart on
// the same data dir the thread holds one message, stopped, holding the
// whole answer once, nothing posted beside it, and the thread's status
// ("is thinking…") cleared after it was last set.
func TestSlackStreamKilledWhileTheModelStreams(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the bot binary and SIGKILLs it while an answer streams (-short skips it)")
	}
	bin := buildCrashBot(t)
	models := map[bool]*sseModel{false: newSSEModel(t, 8, 350*time.Millisecond, false), true: newSSEModel(t, 8, 350*time.Millisecond, true)}
	// Kill once the Slack message shows this many of the answer's pieces
	// (0: the model has started writing, nothing appended yet; -1: the
	// model's step is journaled, the stream not yet stopped; stopped: the
	// stream is stopped, its answer not yet journaled). rephrase:
	// the model asked again words its answer otherwise, so what the dead
	// process streamed is not a prefix of the answer.
	for _, c := range []struct {
		pieces   int
		rephrase bool
	}{{-1, false}, {0, false}, {3, false}, {1, true}, {6, true}, {stopped, false}} {
		name := fmt.Sprintf("after%dpieces/rephrase=%v", c.pieces, c.rephrase)
		if c.pieces == stopped {
			name = "stopped"
		}
		t.Run(name, func(t *testing.T) {
			model := models[c.rephrase]
			sb := newStreamBot(t, bin, model.URL, fmt.Sprintf("s%dr%d", c.pieces+1, map[bool]int{false: 0, true: 1}[c.rephrase]))
			sb.plain = true
			sb.startSlackOnly()
			switch {
			case c.pieces == stopped:
				sb.killWhenStopped()
			case c.pieces < 0:
				sb.killAtKind("model.step")
			default:
				sb.killWhenStreamed(model, c.pieces)
			}
			sb.startSlackOnly()
			sb.b.waitRunEnd(40 * time.Second)
			sb.b.interrupt()
			sb.checkStopped(t, model.last(sb.b.token))
			sb.b.verify()
		})
	}
}

// killWhenStreamed says the prompt and SIGKILLs the bot once the Slack
// message holds pieces of the model's answer (0: once the model was
// asked).
func (s *streamBot) killWhenStreamed(model *sseModel, pieces int) {
	t := s.b.t
	t.Helper()
	s.say()
	want := 0
	if pieces > 0 {
		want = len(strings.Join(ssePieces(agentAnswer(s.b.token), 8)[:pieces], ""))
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		got := -1
		for _, st := range s.slack.Streams() {
			if st.ThreadTS == s.root && s.root != "" {
				got = len(st.Text)
			}
		}
		if got >= want && (pieces > 0 || model.started(s.b.token)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the stream never held %d pieces:\n%s", pieces, s.b.logs.String())
		}
	}
	s.b.kill()
}

// stopped, as the pieces of TestSlackStreamKilledWhileTheModelStreams,
// kills the bot once the stream is stopped.
const stopped = 1 << 10

// killWhenStopped says the prompt and SIGKILLs the bot as soon as the
// Slack fake holds the thread's stream stopped, single-stepping it so the
// kill lands before the answer's message.posted is journaled (the status
// is still to be cleared then).
func (s *streamBot) killWhenStopped() {
	b := s.b
	b.t.Helper()
	p := b.cmd.Process
	s.say()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(crashStep) {
		_ = p.Signal(syscall.SIGSTOP)
		done := false
		for _, st := range s.slack.Streams() {
			done = done || st.ThreadTS == s.root && s.root != "" && st.Stopped
		}
		if done {
			break
		}
		_ = p.Signal(syscall.SIGCONT)
		if time.Now().After(deadline) {
			b.t.Fatalf("the stream was never stopped:\n%s", b.logs.String())
		}
	}
	b.kill()
	if n := b.countKind("message.posted"); n > 0 {
		b.t.Logf("the kill came after the answer was journaled (%d message.posted): this round proves less", n)
	}
}

// killAtKind says the prompt and SIGKILLs the bot as soon as the journal
// holds a command of kind, single-stepping it as crashBot.killAt does.
func (s *streamBot) killAtKind(kind string) {
	b := s.b
	b.t.Helper()
	p := b.cmd.Process
	s.say()
	for deadline := time.Now().Add(30 * time.Second); ; {
		_ = p.Signal(syscall.SIGSTOP)
		var c int
		err := b.journal().QueryRow(`SELECT count(*) FROM commands WHERE kind = ?`, kind).Scan(&c)
		if err == nil && c > 0 {
			break
		}
		_ = p.Signal(syscall.SIGCONT)
		if time.Now().After(deadline) {
			b.t.Fatalf("the journal never held a %s (last error %v):\n%s", kind, err, b.logs.String())
		}
		if err != nil {
			time.Sleep(20 * time.Millisecond) // as in crashBot.killAt
		} else {
			time.Sleep(crashStep)
		}
	}
	b.kill()
}

// checkStopped asserts one stopped stream holding answer, no other post
// in the thread, and the thread's status cleared after it was last set.
func (s *streamBot) checkStopped(t *testing.T, answer string) {
	t.Helper()
	var streams []slackfake.Stream
	for _, st := range s.slack.Streams() {
		if st.ThreadTS == s.root {
			streams = append(streams, st)
		}
	}
	if len(streams) != 1 {
		t.Fatalf("%d streams in the thread, want 1: %+v\n%s", len(streams), streams, s.b.logs.String())
	}
	st := streams[0]
	if !st.Stopped {
		t.Errorf("the stream was left open")
	}
	if msg, ok := s.slack.Message(st.Channel, st.TS); !ok || msg.Text != answer {
		t.Errorf("the message holds %q (found %v), want the answer once: %q", msg.Text, ok, answer)
	}
	for _, p := range s.slack.Posts() {
		if p.ThreadTS == s.root {
			t.Errorf("the bot posted %q in the thread besides the stream", p.Text)
		}
	}
	var last *slackfake.StatusCall
	for _, c := range s.slack.Statuses() {
		if c.ThreadTS == s.root {
			last = &c
		}
	}
	if last == nil || last.Status != "" {
		t.Errorf("the thread's status was left at %+v, want it cleared", last)
	}
	if t.Failed() {
		t.Logf("bot logs:\n%s", s.b.logs.String())
	}
}

// sseModel answers "just answer" prompts with agentAnswer streamed in
// pieces (OpenAI's wire format), each after a pause; a request without
// "stream" gets it whole.
type sseModel struct {
	*httptest.Server
	mu   chan struct{}
	seen map[string]int // streamed calls per token
	// rephrase: each call words the answer differently, as a real model
	// asked again would.
	rephrase bool
}

func (m *sseModel) started(token string) bool {
	m.mu <- struct{}{}
	defer func() { <-m.mu }()
	return m.seen[token] > 0
}

// answer is what the model streams on call n (from 1) for token.
func (m *sseModel) answer(token string, n int) string {
	if m.rephrase && n > 1 {
		return fmt.Sprintf("Asked again (%d): ", n) + agentAnswer(token)
	}
	return agentAnswer(token)
}

// last is the answer of the latest call for token.
func (m *sseModel) last(token string) string {
	m.mu <- struct{}{}
	defer func() { <-m.mu }()
	return m.answer(token, m.seen[token])
}

func ssePieces(s string, n int) []string {
	size := (len(s) + n - 1) / n
	var out []string
	for len(s) > size {
		out = append(out, s[:size])
		s = s[size:]
	}
	return append(out, s)
}

func newSSEModel(t *testing.T, pieces int, pause time.Duration, rephrase bool) *sseModel {
	m := &sseModel{mu: make(chan struct{}, 1), seen: map[string]int{}, rephrase: rephrase}
	m.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req llmtest.OpenAIChatRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, `{"error":{"message":"bad json"}}`, http.StatusBadRequest)
			return
		}
		token, _ := crashRequest(req)
		m.mu <- struct{}{}
		m.seen[token]++
		answer := m.answer(token, m.seen[token])
		<-m.mu
		if !req.Stream {
			writeCompletion(w, req.Model, map[string]any{"role": "assistant", "content": answer}, "stop")
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fl := w.(http.Flusher)
		send := func(delta map[string]any, finish any) bool {
			b, _ := json.Marshal(map[string]any{"id": "chatcmpl-sse", "object": "chat.completion.chunk", "created": time.Now().Unix(), "model": req.Model,
				"choices": []map[string]any{{"index": 0, "delta": delta, "finish_reason": finish}}})
			if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil {
				return false
			}
			fl.Flush()
			return true
		}
		if !send(map[string]any{"role": "assistant", "content": ""}, nil) {
			return
		}
		for _, p := range ssePieces(answer, pieces) {
			select {
			case <-r.Context().Done():
				return
			case <-time.After(pause):
			}
			if !send(map[string]any{"content": p}, nil) {
				return
			}
		}
		send(map[string]any{}, "stop")
		b, _ := json.Marshal(map[string]any{"id": "chatcmpl-sse", "object": "chat.completion.chunk", "created": time.Now().Unix(), "model": req.Model,
			"choices": []any{}, "usage": map[string]any{"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}})
		fmt.Fprintf(w, "data: %s\n\ndata: [DONE]\n\n", b)
		fl.Flush()
	}))
	t.Cleanup(m.Close)
	m.URL += "/v1"
	return m
}

// startSlackOnly runs the bot without the sandbox and waits until the
// Slack adapter has read its scopes.
func (s *streamBot) startSlackOnly() {
	b := s.b
	b.t.Helper()
	fmt.Fprintf(b.logs, "==== start\n")
	mark := len(b.logs.String())
	cmd := exec.Command(b.bin, "serve")
	cmd.Env = append(slices.Clone(b.env), "MARLOWE_SANDBOX=0")
	cmd.Stdout, cmd.Stderr = b.logs, b.logs
	if err := cmd.Start(); err != nil {
		b.t.Fatal(err)
	}
	b.cmd, b.exited = cmd, make(chan struct{})
	go func() {
		b.err = cmd.Wait()
		close(b.exited)
	}()
	for deadline := time.Now().Add(15 * time.Second); !strings.Contains(b.logs.String()[mark:], "agent surface on"); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			b.t.Fatalf("bot did not start:\n%s", b.logs.String())
		}
	}
}

// TestSlackStreamKilledOnPostgres is the same kill on the compose stack's
// stores (Postgres journal, Redis leases): the restarted bot takes the
// run over once the dead process's lease lapses, and finishes the stream.
func TestSlackStreamKilledOnPostgres(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the bot binary (-short skips it)")
	}
	bin := buildCrashBot(t)
	model := newSSEModel(t, 8, 350*time.Millisecond, false)
	rs := testredis.StartServer(t)
	for _, pieces := range []int{1, 4} {
		t.Run(fmt.Sprintf("after%dpieces", pieces), func(t *testing.T) {
			// A journal of its own: the fake's channel ids repeat.
			dbURL, key := testpg.New(t), testSigningKey(t)
			sb := newStreamBot(t, bin, model.URL, fmt.Sprintf("pg%d", pieces))
			sb.plain = true
			sb.b.env = append(sb.b.env, "MARLOWE_DATABASE_URL="+dbURL, "MARLOWE_REDIS_URL="+rs.URL(), "MARLOWE_SIGNING_KEY="+key,
				"MARLOWE_LEASE_TTL=2s") // the restart waits out the dead process's lease
			sb.startSlackOnly()
			sb.killWhenStreamed(model, pieces)
			sb.startSlackOnly()
			for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(50 * time.Millisecond) {
				done := false
				for _, st := range sb.slack.Streams() {
					done = done || st.ThreadTS == sb.root && st.Stopped
				}
				if done {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the stream was never stopped:\n%s", sb.b.logs.String())
				}
			}
			sb.b.interrupt()
			sb.checkStopped(t, model.last(sb.b.token))
		})
	}
}

// TestSlackStreamKilledInAnAssistantThread: the same kill in a DM thread
// (Slack's assistant panel: channel type im, the answer streamed with no
// recipient, "is thinking…" on the thread), after 3 pieces streamed.
func TestSlackStreamKilledInAnAssistantThread(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the bot binary (-short skips it)")
	}
	const dm = "D0ALICEDM1"
	bin := buildCrashBot(t)
	model := newSSEModel(t, 8, 350*time.Millisecond, false)
	sb := newStreamBot(t, bin, model.URL, "dm3")
	sb.slack.Close()
	sb.slack = slackfake.New(slackfake.Config{
		RedeliverAfter: 300 * time.Millisecond, MaxRetries: 10,
		Scopes:   append(slackad.RequiredScopes(), slackad.AgentScope),
		Channels: map[string]string{dm: "im"},
	})
	t.Cleanup(sb.slack.Close)
	for i, e := range sb.b.env {
		if strings.HasPrefix(e, "MARLOWE_SLACK_API_URL=") {
			sb.b.env[i] = "MARLOWE_SLACK_API_URL=" + sb.slack.APIURL()
		}
	}
	sb.startSlackOnly()
	sb.root = sb.slack.AddMessage(dm, "", streamAlice, "hello")
	sb.slack.Say(dm, sb.root, streamAlice, "just answer with the code "+sb.b.token)
	want := len(strings.Join(ssePieces(agentAnswer(sb.b.token), 8)[:3], ""))
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		got := -1
		for _, st := range sb.slack.Streams() {
			if st.ThreadTS == sb.root {
				got = len(st.Text)
			}
		}
		if got >= want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the stream never held 3 pieces:\n%s", sb.b.logs.String())
		}
	}
	sb.b.kill()
	sb.startSlackOnly()
	sb.b.waitRunEnd(40 * time.Second)
	sb.b.interrupt()
	sb.checkStopped(t, model.last(sb.b.token))
	sb.b.verify()
}
