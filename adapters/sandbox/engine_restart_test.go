package sandbox

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/coretest"
	"github.com/marlowe-bot/marlowe/engine"
)

// TestEngineStreamAcrossRestart: a deploy run's plan is open, waiting for
// approval, when the sandbox and the engine stop. A new sandbox on the same
// data file and a new engine on the same journal take the approval click:
// the run finishes that same message (plan done, the answer in it), and
// no second stream or answer appears.
func TestEngineStreamAcrossRestart(t *testing.T) {
	file := filepath.Join(t.TempDir(), "sandbox.jsonl")
	j := coretest.NewMemJournal(coretest.NewSigner(t))
	useJournal := func(c *engine.Config) { c.Journal = j }
	msgs := func(sb *Sandbox) []message {
		sb.mu.Lock()
		defer sb.mu.Unlock()
		var out []message
		for _, m := range sb.msgs {
			out = append(out, *m)
		}
		return out
	}
	waitMsg := func(sb *Sandbox, what string, cond func(m message) bool) message {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			for _, m := range msgs(sb) {
				if cond(m) {
					return m
				}
			}
		}
		t.Fatalf("timed out waiting for %s", what)
		return message{}
	}

	sb1 := newSandbox(t, Config{Clock: time.Now, DataFile: file})
	eng1 := newEngine(t, sb1, useJournal)
	ctx1, stop1 := context.WithCancel(context.Background())
	url, err := sb1.Listen(ctx1)
	if err != nil {
		t.Fatal(err)
	}
	ran := make(chan error, 1)
	go func() { ran <- sb1.Run(ctx1, eng1.Deliver) }()
	q := say(t, strings.TrimSuffix(url, "/"), "bob", "general", "", "<@marlowe> please deploy 1.4 to staging")
	card := waitMsg(sb1, "the approval card", func(m message) bool { return m.Thread == q && m.Card != nil && len(m.Card.Actions) > 0 })
	plan := waitMsg(sb1, "the open plan", func(m message) bool {
		return m.Thread == q && m.Stream != nil && !m.Stream.Stopped && strings.HasPrefix(m.Stream.Title, "🔐")
	})
	if err := eng1.WaitIdle(t.Context()); err != nil {
		t.Fatal(err)
	}
	_ = eng1.Close()
	stop1()
	if err := <-ran; err != nil {
		t.Fatalf("first sandbox: %v", err)
	}

	sb2 := newSandbox(t, Config{Clock: time.Now, DataFile: file})
	eng2 := newEngine(t, sb2, useJournal)
	base := run(t, sb2, eng2.Deliver)
	if code, body := postJSON(t, base+"/api/click", map[string]string{"person": "alice", "message": card.ID, "action": "approve"}); code != 202 {
		t.Fatalf("click: %d %s", code, body)
	}
	done := waitMsg(sb2, "the same plan done", func(m message) bool { return m.ID == plan.ID && m.Stream != nil && m.Stream.Stopped })
	if done.Stream.Title != "✅ Done" || !strings.HasPrefix(done.Text, deployResult) || len(done.Stream.Tasks) != 1 || done.Stream.Tasks[0].Status != core.TaskComplete {
		t.Errorf("finished plan: %q %+v", done.Text, done.Stream)
	}
	if err := eng2.WaitIdle(t.Context()); err != nil {
		t.Fatal(err)
	}
	streams, answers := 0, 0
	for _, m := range msgs(sb2) {
		if m.Bot && m.Thread == q {
			if m.Stream != nil {
				streams++
			}
			if strings.Contains(m.Text, deployResult) {
				answers++
			}
		}
	}
	if streams != 1 || answers != 1 {
		t.Errorf("after the restart: %d streams and %d answers in the thread, want one each", streams, answers)
	}
}
