package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/adapters/slack/slackfake"
	"github.com/marlowe-bot/marlowe/internal/testport"
	"github.com/marlowe-bot/marlowe/llm/llmtest"
)

// minimalSlack is the smallest Slack stand-in a bot could meet: auth.test and
// chat.postMessage answer; every other method says unknown_method.
type minimalSlack struct {
	mu    sync.Mutex
	posts []map[string]string
	seq   int
}

func (m *minimalSlack) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_ = r.ParseForm()
	w.Header().Set("Content-Type", "application/json")
	switch strings.TrimPrefix(r.URL.Path, "/api/") {
	case "auth.test":
		fmt.Fprint(w, `{"ok":true,"url":"https://fake.slack/","team":"Fake","user":"marlowe","team_id":"T1","user_id":"UBOT1","bot_id":"BBOT1"}`)
	case "chat.postMessage":
		m.mu.Lock()
		m.seq++
		ts := fmt.Sprintf("1800000000.%06d", m.seq)
		m.posts = append(m.posts, map[string]string{"channel": r.Form.Get("channel"), "thread_ts": r.Form.Get("thread_ts"), "text": r.Form.Get("text"), "ts": ts})
		m.mu.Unlock()
		fmt.Fprintf(w, `{"ok":true,"channel":%q,"ts":%q}`, r.Form.Get("channel"), ts)
	default:
		fmt.Fprint(w, `{"ok":false,"error":"unknown_method"}`)
	}
}

func (m *minimalSlack) all() []map[string]string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]map[string]string(nil), m.posts...)
}

func freeAddr(t *testing.T) string {
	t.Helper()
	return "127.0.0.1:" + testport.FreeString(t)
}

// TestServeHTTPModeAgainstMinimalSlack: Events API mode against a stand-in
// that implements only auth.test and chat.postMessage. A signed mention is
// answered in its thread, an untagged follow-up in the thread too, and the
// missing methods (chat.update, conversations.info, users.list) cost nothing
// but warnings.
func TestServeHTTPModeAgainstMinimalSlack(t *testing.T) {
	t.Run("openai", func(t *testing.T) {
		m := llmtest.NewOpenAIServer(t)
		minimalSlackConversation(t, "openai", m.URL, m.Enqueue)
	})
	t.Run("anthropic", func(t *testing.T) {
		m := llmtest.NewAnthropicServer(t)
		minimalSlackConversation(t, "anthropic", m.URL, m.Enqueue)
	})
}

// minimalSlackConversation runs the conversation with the given provider's
// fake behind MARLOWE_MODEL_BASE_URL; enqueue scripts its replies.
func minimalSlackConversation(t *testing.T, provider, modelURL string, enqueue func(...llmtest.Response)) {
	const secret = "minimal-signing-secret"
	fake := &minimalSlack{}
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	addr := freeAddr(t)
	getenv := env(map[string]string{
		"MARLOWE_DATA_DIR":       t.TempDir(),
		"MARLOWE_HTTP_ADDR":      addr,
		"MARLOWE_SLACK_MODE":     "http",
		"SLACK_BOT_TOKEN":        "xoxb-minimal",
		"SLACK_SIGNING_SECRET":   secret,
		"MARLOWE_SLACK_API_URL":  srv.URL + "/api/",
		"MARLOWE_MODEL_PROVIDER": provider,
		"MARLOWE_MODEL":          "fake",
		"MARLOWE_MODEL_BASE_URL": modelURL,
	})
	ctx, cancel := context.WithCancel(t.Context())
	logs := &syncBuffer{}
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"serve"}, getenv, strings.NewReader(""), io.Discard, logs) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})

	event := func(id, ts, thread, user, text string) int {
		t.Helper()
		ev := map[string]any{"type": "message", "channel": "C1", "channel_type": "channel", "user": user, "text": text, "ts": ts, "event_ts": ts, "team": "T1"}
		if thread != "" {
			ev["thread_ts"] = thread
		}
		body, _ := json.Marshal(map[string]any{"type": "event_callback", "team_id": "T1", "api_app_id": "A1", "event_id": id, "event_time": time.Now().Unix(), "event": ev})
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			req, _ := slackfake.SignedRequest("http://"+addr+"/slack/events", secret, time.Now(), "application/json", body)
			res, err := http.DefaultClient.Do(req)
			if err == nil {
				res.Body.Close()
				if res.StatusCode != http.StatusServiceUnavailable || time.Now().After(deadline) {
					return res.StatusCode
				}
			} else if time.Now().After(deadline) {
				t.Fatalf("post event: %v\n%s", err, logs.String())
			}
		}
	}
	waitAnswer := func(thread, text string) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			for _, p := range fake.all() {
				if p["thread_ts"] == thread && strings.Contains(p["text"], text) {
					return
				}
			}
		}
		t.Fatalf("no answer %q in thread %s; posts %v\nlogs:\n%s", text, thread, fake.all(), logs.String())
	}

	// A tool step, then the answer: the provider's tool-call wire format
	// round-trips through the real SDK.
	enqueue(llmtest.Tools(llmtest.Call("call-1", "remember", `{"text":"ping means the deploy bot is alive"}`)), llmtest.Text("Pong from the model."))
	if code := event("Ev1", "1700000000.000100", "", "UALICE", "<@UBOT1> ping"); code != http.StatusOK {
		t.Fatalf("signed mention: HTTP %d", code)
	}
	waitAnswer("1700000000.000100", "Pong from the model.")

	enqueue(llmtest.Text("Second answer."))
	if code := event("Ev2", "1700000000.000200", "1700000000.000100", "UBOB", "and again?"); code != http.StatusOK {
		t.Fatalf("follow-up: HTTP %d", code)
	}
	waitAnswer("1700000000.000100", "Second answer.")

	// Chatter at the top level from someone else: nothing posted.
	n := len(fake.all())
	if code := event("Ev3", "1700000000.000300", "", "UCAROL", "lunch?"); code != http.StatusOK {
		t.Fatalf("chatter: HTTP %d", code)
	}
	time.Sleep(300 * time.Millisecond)
	if got := fake.all(); len(got) != n {
		t.Fatalf("chatter got a reply: %v", got[n:])
	}
	for _, p := range fake.all() {
		if p["thread_ts"] == "" {
			t.Fatalf("posted at the top level: %v", p)
		}
	}
	if bytes.Contains([]byte(logs.String()), []byte("lunch?")) {
		t.Fatal("ignored text in logs")
	}
}
