package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/internal/testpg"
)

// syncBuffer is a bytes.Buffer safe for the server's log writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestServeSandboxEndToEnd starts the real composition root with nothing
// configured but a data dir: the sandbox answers a mention through the
// offline grammar, ignores chatter, and the process stops cleanly.
func TestServeSandboxEndToEnd(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) { sandboxConversation(t, "") })
	t.Run("postgres", func(t *testing.T) { sandboxConversation(t, testpg.New(t)) })
}

// sandboxConversation runs the conversation on the embedded store, or on
// Postgres when dbURL is set, then checks the journal and memory commands.
func sandboxConversation(t *testing.T, dbURL string) {
	dir := t.TempDir()
	vars := map[string]string{
		"MARLOWE_DATA_DIR":     dir,
		"MARLOWE_HTTP_ADDR":    "127.0.0.1:0",
		"MARLOWE_SANDBOX_ADDR": "127.0.0.1:0",
		"MARLOWE_DATABASE_URL": dbURL,
	}
	getenv := env(vars)
	ctx, cancel := context.WithCancel(t.Context())
	logs := &syncBuffer{}
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"serve"}, getenv, strings.NewReader(""), io.Discard, logs) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})

	urlRe := regexp.MustCompile(`sandbox ready.* url=(http://\S+/)`)
	var base string
	for deadline := time.Now().Add(10 * time.Second); base == "" && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if m := urlRe.FindStringSubmatch(logs.String()); m != nil {
			base = m[1]
		}
	}
	if base == "" {
		t.Fatalf("no sandbox URL logged:\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), "no model configured") {
		t.Errorf("start-up log does not say that no model is configured")
	}

	say := func(person, text string) string {
		t.Helper()
		body, _ := json.Marshal(map[string]string{"person": person, "channel": "general", "text": text})
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"api/messages", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Origin", strings.TrimSuffix(base, "/"))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m struct{ ID string }
		if resp.StatusCode != http.StatusCreated || json.NewDecoder(resp.Body).Decode(&m) != nil {
			t.Fatalf("post message: %s", resp.Status)
		}
		return m.ID
	}
	type msg struct {
		ID, Thread, Author, Text string
		Card                     *struct {
			Title      string
			Resolution string
			Actions    []struct{ ID string }
		}
		Decision *struct {
			Route  bool
			Reason string
		}
	}
	// The sandbox keeps every message revision in its data file: the latest
	// revision of each id is what the page shows.
	messages := func() []msg {
		raw, err := os.ReadFile(filepath.Join(dir, "sandbox.jsonl"))
		if err != nil {
			return nil
		}
		latest := map[string]msg{}
		var order []string
		for line := range strings.Lines(string(raw)) {
			var rec struct{ Msg *msg }
			if json.Unmarshal([]byte(line), &rec) != nil || rec.Msg == nil {
				continue
			}
			if _, seen := latest[rec.Msg.ID]; !seen {
				order = append(order, rec.Msg.ID)
			}
			latest[rec.Msg.ID] = *rec.Msg
		}
		out := make([]msg, 0, len(order))
		for _, id := range order {
			out = append(out, latest[id])
		}
		return out
	}
	waitFor := func(what string, ok func([]msg) bool) []msg {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(30 * time.Millisecond) {
			if ms := messages(); ok(ms) {
				return ms
			}
		}
		t.Fatalf("timed out waiting for %s; messages: %+v", what, messages())
		return nil
	}

	asked := say("alice", "<@marlowe> help")
	waitFor("an answer in the thread", func(ms []msg) bool {
		for _, m := range ms {
			if m.Thread == asked && m.Author == "marlowe" && strings.Contains(strings.ToLower(m.Text), "remember") {
				return true
			}
		}
		return false
	})
	// The room remembers, through the offline grammar and the real memory.
	rememberID := say("alice", "<@marlowe> remember the deploy window is Thursday 14:00")
	waitFor("the memory to be stored", func(ms []msg) bool {
		for _, m := range ms {
			if m.Thread == rememberID && m.Author == "marlowe" && strings.HasPrefix(m.Text, "Remembered") {
				return true
			}
		}
		return false
	})
	recallID := say("carol", "<@marlowe> recall deploy window")
	waitFor("the recalled memory", func(ms []msg) bool {
		for _, m := range ms {
			if m.Thread == recallID && m.Author == "marlowe" && strings.Contains(m.Text, "Thursday 14:00") {
				return true
			}
		}
		return false
	})

	// The gate works offline too: once the channel asks approval for
	// writes, a remember waits for a card, and Bob's click resumes it.
	policyID := say("alice", "<@marlowe> policy set approval write")
	// Two top-level messages are two threads, handled concurrently: wait
	// for the policy to be in force before the remember it should gate.
	waitFor("the policy change", func(ms []msg) bool {
		for _, m := range ms {
			if m.Thread == policyID && m.Author == "marlowe" && strings.Contains(m.Text, "Policy updated") {
				return true
			}
		}
		return false
	})
	rememberID = say("alice", "<@marlowe> remember the freeze starts Monday")
	ms := waitFor("the approval card", func(ms []msg) bool {
		for _, m := range ms {
			if m.Thread == rememberID && m.Card != nil && len(m.Card.Actions) > 0 {
				return true
			}
		}
		return false
	})
	var cardID string
	for _, m := range ms {
		if m.Thread == rememberID && m.Card != nil {
			cardID = m.ID
		}
	}
	click, _ := json.Marshal(map[string]string{"person": "bob", "message": cardID, "action": "approve"})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"api/click", bytes.NewReader(click))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Origin", strings.TrimSuffix(base, "/"))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("click: %s", resp.Status)
	}
	waitFor("the approved remember", func(ms []msg) bool {
		for _, m := range ms {
			if m.Thread == rememberID && m.Author == "marlowe" && strings.HasPrefix(m.Text, "Remembered") {
				return true
			}
		}
		return false
	})

	chatter := say("bob", "lunch anyone?")
	ms = waitFor("the chatter's decision", func(ms []msg) bool {
		for _, m := range ms {
			if m.ID == chatter && m.Decision != nil {
				return true
			}
		}
		return false
	})
	for _, m := range ms {
		if m.ID == chatter && (m.Decision.Route || m.Decision.Reason != "no-window") {
			t.Fatalf("chatter decision = %+v", *m.Decision)
		}
		if m.Thread == chatter {
			t.Fatalf("chatter got a reply: %+v", m)
		}
	}
	if strings.Contains(logs.String(), "lunch anyone") {
		t.Fatal("the text of an ignored message reached the log")
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve returned %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("serve did not stop after cancel")
	}
	done <- nil // for the cleanup
	if !strings.Contains(logs.String(), "stopped") {
		t.Fatalf("no clean stop logged:\n%s", logs.String())
	}

	// After the fact: the journal verifies and memory rebuilds from it.
	if out, err := runBot(t, getenv, "", "verify"); err != nil {
		t.Fatalf("verify: %v %s", err, out)
	}
	out, err := runBot(t, getenv, "", "memory", "rebuild", "--all")
	if err != nil || !strings.Contains(out, "sandbox/local/general") {
		t.Fatalf("memory rebuild: %v\n%s", err, out)
	}
	if _, err := runBot(t, getenv, "", "memory", "rebuild"); err == nil {
		t.Fatal("memory rebuild without --channel or --all accepted")
	}
}
