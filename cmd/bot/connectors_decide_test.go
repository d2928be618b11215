//go:build unix

package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/internal/mcpservers"
	"github.com/marlowe-bot/marlowe/llm/llmtest"
)

// TestFilesystemServerDeclineAndAlwaysAllowThroughServe: the built binary
// with the real @modelcontextprotocol/server-filesystem, the two answers
// to a card besides Approve.
//
//   - Decline: a write_file (destructiveHint: irreversible) the admin
//     declines never reaches the server; the model is told it was
//     declined, and the answer says so.
//   - Always allow: create_directory (destructiveHint false: a write,
//     raised to send in the config, which the channel's approval levels
//     ask for) asks once, with "Always allow"; after the admin's Always
//     allow, the next create_directory in the channel runs without a
//     card, and both directories exist.
func TestFilesystemServerDeclineAndAlwaysAllowThroughServe(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the bot binary and runs an npm MCP server (-short skips it)")
	}
	entry := mcpservers.Entry(t, "server-filesystem")
	bin := buildCrashBot(t)
	root := t.TempDir()
	declined := filepath.Join(root, "declined.txt")
	dir1, dir2 := filepath.Join(root, "one"), filepath.Join(root, "two")
	model := &decideModel{calls: map[string][2]string{
		"-decline": {"filesystem__write_file", mustJSON(t, map[string]string{"content": "never", "path": declined})},
		"-mkdir1":  {"filesystem__create_directory", mustJSON(t, map[string]string{"path": dir1})},
		"-mkdir2":  {"filesystem__create_directory", mustJSON(t, map[string]string{"path": dir2})},
	}}
	srv := httptest.NewServer(http.HandlerFunc(model.serve))
	t.Cleanup(srv.Close)
	cfg := writeMCPConfig(t, `{"mcpServers": {"filesystem": {"command": "node", "args": [`+jsString(entry)+`, `+jsString(root)+`],
		"consequences": {"create_directory": "send"}}}}`)
	b := newCrashBot(t, bin, srv.URL+"/v1", "fsdecide")
	b.env = append(b.env, "MARLOWE_MCP_CONFIG="+cfg, "PATH="+os.Getenv("PATH"))
	b.start()
	awaitTrue(t, "the filesystem connector to be ready", 30*time.Second, func() bool {
		return strings.Contains(b.logs.String(), "connector ready")
	}, b.logs.String)

	// ask posts a request and returns its card, or "" when the answer
	// came without one.
	ask := func(person, suffix, answer string) (thread string, card crashMsg) {
		t.Helper()
		b.sayAs(person, "<@marlowe> please "+b.token+suffix)
		awaitTrue(t, "a card or the answer for "+suffix, 30*time.Second, func() bool {
			for _, m := range b.messages() {
				if !m.Bot && strings.HasSuffix(m.Text, b.token+suffix) {
					thread = m.ID
				}
				if thread == "" || m.Thread != thread {
					continue
				}
				if m.Card != nil && len(m.Card.Actions) > 0 {
					card = m
					return true
				}
				if m.Bot && answer != "" && strings.Contains(m.Text, answer) {
					return true
				}
			}
			return false
		}, b.logs.String)
		return thread, card
	}
	answered := func(thread, want string) {
		t.Helper()
		awaitTrue(t, "the answer "+want, 30*time.Second, func() bool {
			for _, m := range b.messages() {
				if m.Bot && m.Thread == thread && strings.Contains(m.Text, want) {
					return true
				}
			}
			return false
		}, b.logs.String)
	}

	// Decline.
	thread, card := ask("bob", "-decline", "")
	if card.Card == nil {
		t.Fatal("the write ran without a card")
	}
	b.click("alice", card.ID, "decline")
	answered(thread, "Result: ")
	if _, err := os.Stat(declined); err == nil {
		t.Fatal("a declined write reached the server: the file exists")
	}
	if got := model.result("-decline"); !strings.Contains(strings.ToLower(got), "declin") {
		t.Errorf("the model was told %q about the declined call", got)
	}

	// Always allow, then no card for the next one.
	thread, card = ask("bob", "-mkdir1", "")
	if card.Card == nil {
		t.Fatal("the first create_directory ran without a card")
	}
	hasAlways := false
	for _, a := range card.Card.Actions {
		hasAlways = hasAlways || a.ID == "always"
	}
	if !hasAlways {
		t.Fatalf("a write's card has no Always allow: %+v", card.Card.Actions)
	}
	b.click("alice", card.ID, "always")
	answered(thread, "Result: ")
	thread, card = ask("bob", "-mkdir2", "Result: ")
	if card.Card != nil {
		t.Fatalf("asked again after Always allow: %+v", card.Card)
	}
	for _, d := range []string{dir1, dir2} {
		if fi, err := os.Stat(d); err != nil || !fi.IsDir() {
			t.Errorf("%s was not created: %v", d, err)
		}
	}
	b.waitRunsEnd(3)
	b.interrupt()
	if n := b.countKind("approval.requested"); n != 2 {
		t.Errorf("%d approval.requested, want 2 (the declined write, the first directory)", n)
	}
	b.verify()
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// decideModel calls the tool its task's suffix names, then answers
// "Result: " and the tool's result; it keeps each task's result.
type decideModel struct {
	calls   map[string][2]string // suffix → tool, arguments
	mu      sync.Mutex
	results map[string]string
}

func (m *decideModel) serve(w http.ResponseWriter, r *http.Request) {
	var req llmtest.OpenAIChatRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, "bad json", http.StatusBadRequest)
		return
	}
	var task, result string
	for _, msg := range req.Messages {
		switch msg.Role {
		case "user":
			task = msg.Text()
		case "tool":
			result = msg.Text()
		}
	}
	for suffix, call := range m.calls {
		if !strings.HasSuffix(task, suffix) {
			continue
		}
		if result == "" {
			writeCompletion(w, req.Model, map[string]any{"role": "assistant", "content": nil, "tool_calls": []map[string]any{{
				"id": "call_" + strings.TrimPrefix(suffix, "-"), "type": "function", "function": map[string]any{"name": call[0], "arguments": call[1]}}}}, "tool_calls")
			return
		}
		m.mu.Lock()
		if m.results == nil {
			m.results = map[string]string{}
		}
		m.results[suffix] = result
		m.mu.Unlock()
		writeCompletion(w, req.Model, map[string]any{"role": "assistant", "content": "Result: " + result}, "stop")
		return
	}
	writeCompletion(w, req.Model, map[string]any{"role": "assistant", "content": "Nothing to do."}, "stop")
}

func (m *decideModel) result(suffix string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.results[suffix]
}
