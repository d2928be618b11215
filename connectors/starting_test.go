//go:build linux

package connectors

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/gate"
)

// A server still starting offers nothing yet; once it has listed its
// tools, the next thing that asks (a later run, or the next model step
// of a run already going: the engine asks the registry at every step)
// is offered them. Startup never waits for it.
func TestToolsOfAServerStillStartingAreOfferedOnceListed(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "gate")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := &Config{File: "test.json", Servers: []Server{
		{Name: "late", Type: Stdio, Command: testServerBin, Env: map[string]string{"TESTSERVER_START_GATE": fifo}, Timeout: time.Minute},
	}}
	ch := make(states, 64)
	m := New(cfg, Options{OnState: func(s State) {
		select {
		case ch <- s:
		default:
		}
	}})
	m.Start(context.Background())
	t.Cleanup(func() { _ = m.Close() })
	reg, err := gate.NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	reg = reg.WithSource(m, DefaultFindToolAfter)
	const ch1 = core.ChannelKey("slack/T1/C1")
	// The server is blocked on the FIFO: it cannot have listed anything.
	if got := reg.ExposedIn(ch1, core.Policy{}); len(got) != 0 {
		t.Fatalf("offered before the server listed its tools: %v", got)
	}
	if st := m.States(); len(st) != 1 || st[0].Status != "starting" {
		t.Fatalf("states: %+v", st)
	}
	// Let it start (opening the FIFO for writing unblocks its read).
	if err := os.WriteFile(fifo, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	ch.await(t, "late ready", func(s State) bool { return s.Name == "late" && s.Status == "ready" })
	got := reg.ExposedIn(ch1, core.Policy{})
	if !slices.Contains(got, "late__echo") || len(got) != 12 {
		t.Errorf("offered after listing: %v", got)
	}
}
