//go:build unix

package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/llm/llmtest"
)

// TestConnectorCallInDoubtAfterSIGKILL runs the real binary with a stdio
// MCP server, SIGKILLs it while the server holds a write call, and starts
// it again: the server died with the bot (no orphan, though it ignores the
// end of its stdin), the resumed run does not send the call again (the
// server's log has it once) and asks the person, on a card, to send it
// again or skip it.
func TestConnectorCallInDoubtAfterSIGKILL(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the bot binary and SIGKILLs it (-short skips it)")
	}
	bin, srvBin := buildCrashBot(t), buildMCPTestServer(t)
	marks := t.TempDir()
	cfg := writeMCPConfig(t, `{"mcpServers": {"t": {"command": "`+srvBin+`", "env": {"TESTSERVER_MARKS": "`+marks+`", "TESTSERVER_IGNORE_EOF": "1"}}}}`)

	// The model: no tool result yet → call t__hang; one result → answer
	// with it, so the post shows what the run was told.
	model := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req llmtest.OpenAIChatRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, "bad json", http.StatusBadRequest)
			return
		}
		token, results := crashRequest(req)
		if results == 0 {
			writeCompletion(w, req.Model, map[string]any{"role": "assistant", "content": nil, "tool_calls": []map[string]any{{
				"id": "call_hang", "type": "function", "function": map[string]any{"name": "t__hang", "arguments": `{"text":"` + token + `"}`}}}}, "tool_calls")
			return
		}
		var result string
		for _, m := range req.Messages {
			if m.Role == "tool" {
				result = m.Text()
			}
		}
		writeCompletion(w, req.Model, map[string]any{"role": "assistant", "content": "Done " + token + ": " + result}, "stop")
	}))
	t.Cleanup(model.Close)

	b := newCrashBot(t, bin, model.URL+"/v1", "mcp")
	b.env = append(b.env, "MARLOWE_MCP_CONFIG="+cfg)
	b.start()
	// A message before the server listed its tools finds none: wait for it.
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(b.logs.String(), "connector ready"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the connector never became ready:\n%s", b.logs.String())
		}
	}
	b.say("<@marlowe> file the ticket, code " + b.token)
	if !awaitPath(filepath.Join(marks, "hang-started")) {
		t.Fatalf("the server never got the call:\n%s", b.logs.String())
	}
	pids := serverPids(t, marks)
	b.kill()
	for _, pid := range pids {
		awaitDead(t, pid)
	}

	b.start()
	// The resumed run does not send the call again: it asks the person.
	var card string
	for deadline := time.Now().Add(60 * time.Second); card == "" && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		for _, m := range b.messages() {
			if m.Bot && strings.Contains(m.Text, "outcome is unknown") {
				card = m.Text
			}
		}
	}
	if card == "" {
		t.Fatalf("the person was not told the call is in doubt:\n%s", b.logs.String())
	}
	log, _ := os.ReadFile(filepath.Join(marks, "hang-log"))
	if n := strings.Count(string(log), b.token); n != 1 {
		t.Errorf("the server received the call %d times, want 1 (never re-sent)", n)
	}
	if n := b.countKind("tool.completed"); n != 0 {
		t.Errorf("%d tool.completed, want 0 (waiting for the person)", n)
	}
	b.verify()
	pids = serverPids(t, marks)
	b.interrupt()
	for _, pid := range pids {
		awaitDead(t, pid)
	}

	// The journal alone replays the run, its connector call included:
	// `bot replay --run` with the bot and the server stopped.
	var run string
	if err := b.journal().QueryRow(`SELECT run FROM commands WHERE kind = 'tool.requested' AND run <> '' LIMIT 1`).Scan(&run); err != nil {
		t.Fatalf("no tool.requested in the journal: %v", err)
	}
	out, err := runBot(t, env(map[string]string{"MARLOWE_DATA_DIR": b.dir}), "", "replay", "--run", run)
	if err != nil {
		t.Fatalf("bot replay --run %s: %v", run, err)
	}
	for _, want := range []string{`"id": "` + run + `"`, "t__hang", b.token} {
		if !strings.Contains(out, want) {
			t.Errorf("bot replay --run lacks %q:\n%s", want, out)
		}
	}
}

// serverPids lists the test server processes started so far (their marks).
func serverPids(t *testing.T, marks string) []int {
	t.Helper()
	entries, err := os.ReadDir(marks)
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, e := range entries {
		if p, ok := strings.CutPrefix(e.Name(), "started-"); ok {
			if pid, err := strconv.Atoi(p); err == nil {
				out = append(out, pid)
			}
		}
	}
	return out
}

func awaitPath(path string) bool {
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			return true
		}
	}
	return false
}

// awaitDead waits until pid is gone (or a zombie nobody reaped yet).
func awaitDead(t *testing.T, pid int) {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			if syscall.Kill(pid, 0) != nil {
				return
			}
			continue
		}
		if i := strings.LastIndexByte(string(stat), ')'); i > 0 && i+2 < len(stat) && stat[i+2] == 'Z' {
			return
		}
	}
	t.Errorf("MCP server %d outlived the bot", pid)
	_ = syscall.Kill(pid, syscall.SIGKILL)
}
