package connectors

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/internal/mcpservers"
	"github.com/marlowe-bot/marlowe/internal/testport"
)

// npmServer returns the entry point of a reference server installed by
// scripts/install-mcp-servers. Without it the test skips, or fails under
// MARLOWE_REQUIRE_SERVICES=1.
func npmServer(t testing.TB, pkg string) string {
	t.Helper()
	return mcpservers.Entry(t, pkg)
}

func runServers(t testing.TB, servers ...Server) *Manager {
	t.Helper()
	for i := range servers {
		if servers[i].Timeout == 0 {
			servers[i].Timeout = 30 * time.Second
		}
	}
	m := New(&Config{File: "test.json", Servers: servers}, Options{})
	m.Start(context.Background())
	t.Cleanup(func() { _ = m.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := m.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	for _, s := range m.States() {
		if s.Status != "ready" {
			t.Fatalf("server %s: %+v", s.Name, s)
		}
	}
	return m
}

func mustCall(t testing.TB, m *Manager, name, args string) core.Observation {
	t.Helper()
	tool, ok := m.Tool(name)
	if !ok {
		var names []string
		for _, x := range m.ToolsIn("a/b/c") {
			names = append(names, x.Name)
		}
		t.Fatalf("no tool %s among %v", name, names)
	}
	obs, err := tool.Run(context.Background(), core.ToolContext{}, []byte(args))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return obs
}

func TestEverythingServerOverStdio(t *testing.T) {
	entry := npmServer(t, "server-everything")
	secret := "sk-live-must-not-leak"
	t.Setenv("OPENAI_API_KEY", secret)
	t.Setenv("MARLOWE_SIGNING_KEY", secret)
	m := runServers(t, Server{Name: "everything", Type: Stdio, Command: "node", Args: []string{entry, "stdio"}, Env: map[string]string{"GIVEN": "yes"}})
	echo, ok := m.Tool("everything__echo")
	if !ok || echo.Consequence != core.Read {
		t.Fatalf("echo: %+v", echo)
	}
	if obs := mustCall(t, m, "everything__echo", `{"message":"hello there"}`); !strings.Contains(obs.Text, "hello there") {
		t.Errorf("echo: %q", obs.Text)
	}
	// A server that prints its environment sees no secret.
	obs := mustCall(t, m, "everything__get-env", `{}`)
	if strings.Contains(obs.Text, secret) || strings.Contains(obs.Text, "OPENAI_API_KEY") || strings.Contains(obs.Text, "MARLOWE_") {
		t.Errorf("the server saw the bot's secrets: %q", obs.Text)
	}
	if !strings.Contains(obs.Text, "GIVEN") {
		t.Errorf("configured env missing: %q", obs.Text)
	}
	if obs := mustCall(t, m, "everything__get-tiny-image", `{}`); !strings.Contains(obs.Text, "[image: image/png") {
		t.Errorf("image not summarised: %q", obs.Text)
	}
	if obs := mustCall(t, m, "everything__get-structured-content", `{"location":"New York"}`); !strings.Contains(obs.Text, "structuredContent: {") {
		t.Errorf("structured content: %q", obs.Text)
	}
	// A long operation cancelled by the run, once the server reports it is
	// running (its first progress), stops at once.
	ctx, cancel := context.WithCancel(context.Background())
	tool, _ := m.Tool("everything__trigger-long-running-operation")
	errc := make(chan error, 1)
	running := make(chan struct{}, 1)
	go func() {
		_, err := tool.Run(ctx, core.ToolContext{Progress: func(core.Progress) {
			select {
			case running <- struct{}{}:
			default:
			}
		}}, []byte(`{"duration":600,"steps":600}`))
		errc <- err
	}()
	select {
	case <-running:
	case err := <-errc:
		t.Fatalf("the long operation ended before it ran: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("the long operation never reported progress")
	}
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("a cancelled call: %v, want context.Canceled", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("cancellation did not end the call")
	}
	// The session survives the cancellation.
	mustCall(t, m, "everything__echo", `{"message":"still here"}`)
}

// freePort returns a local port nothing listens on.
func freePort(t testing.TB) string {
	t.Helper()
	return testport.FreeString(t)
}

// startHTTPServer runs the everything server in an HTTP mode and waits
// until it listens.
func startHTTPServer(t testing.TB, entry, mode string) string {
	t.Helper()
	port := freePort(t)
	cmd := exec.Command("node", entry, mode)
	cmd.Env = append(os.Environ(), "PORT="+port)
	isolate(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { killGroup(cmd); _ = cmd.Wait() })
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if c, err := net.Dial("tcp", "127.0.0.1:"+port); err == nil {
			c.Close()
			return "http://127.0.0.1:" + port
		}
	}
	t.Fatalf("the %s server never listened", mode)
	return ""
}

func TestEverythingServerOverStreamableHTTP(t *testing.T) {
	base := startHTTPServer(t, npmServer(t, "server-everything"), "streamableHttp")
	m := runServers(t, Server{Name: "remote", Type: HTTP, URL: base + "/mcp", Headers: map[string]string{"X-Test": "1"}})
	if obs := mustCall(t, m, "remote__echo", `{"message":"over http"}`); !strings.Contains(obs.Text, "over http") {
		t.Errorf("echo: %q", obs.Text)
	}
	if st := m.States()[0]; st.Transport != HTTP || st.Tools < 5 {
		t.Errorf("state: %+v", st)
	}
}

// A url that only speaks the legacy SSE transport works through the
// fallback.
func TestEverythingServerOverLegacySSEFallback(t *testing.T) {
	base := startHTTPServer(t, npmServer(t, "server-everything"), "sse")
	m := runServers(t, Server{Name: "legacy", Type: HTTP, URL: base + "/sse"})
	if obs := mustCall(t, m, "legacy__echo", `{"message":"over sse"}`); !strings.Contains(obs.Text, "over sse") {
		t.Errorf("echo: %q", obs.Text)
	}
}

func TestFilesystemServer(t *testing.T) {
	entry := npmServer(t, "server-filesystem")
	root := t.TempDir()
	outside := filepath.Join(t.TempDir(), "secret.txt")
	if err := os.WriteFile(outside, []byte("outside"), 0o600); err != nil {
		t.Fatal(err)
	}
	m := runServers(t, Server{Name: "fs", Type: Stdio, Command: "node", Args: []string{entry, root}})
	want := map[string]core.Consequence{"fs__read_text_file": core.Read, "fs__list_directory": core.Read, "fs__write_file": core.Irreversible}
	for name, c := range want {
		tool, ok := m.Tool(name)
		if !ok || tool.Consequence != c {
			t.Errorf("%s: consequence %q, want %q", name, tool.Consequence, c)
		}
	}
	if tool, ok := m.Tool("fs__create_directory"); !ok || tool.Consequence == core.Read {
		t.Errorf("create_directory: %+v", tool)
	}
	p := filepath.Join(root, "note.txt")
	mustCall(t, m, "fs__write_file", fmt.Sprintf(`{"path":%q,"content":"from marlowe"}`, p))
	if obs := mustCall(t, m, "fs__read_text_file", fmt.Sprintf(`{"path":%q}`, p)); !strings.Contains(obs.Text, "from marlowe") {
		t.Errorf("read back: %q", obs.Text)
	}
	tool, _ := m.Tool("fs__read_text_file")
	_, err := tool.Run(context.Background(), core.ToolContext{}, []byte(fmt.Sprintf(`{"path":%q}`, outside)))
	if err == nil || strings.Contains(err.Error(), "outside\n") {
		t.Errorf("reading outside the allowed directory: %v", err)
	}
}

// The reference server's long operation reports progress on the token a
// watched call carries, and the call's Progress gets each step before the
// last in order (the server sends the last report just before its result,
// so the two race, and a report after the call returned is dropped by
// design: progressRoutes). Marlowe
// advertises neither elicitation nor sampling, so the reference server does
// not offer its tools that need them (it registers them only for clients
// that do).
func TestEverythingServerProgressAndNoElicitationOrSampling(t *testing.T) {
	entry := npmServer(t, "server-everything")
	m := runServers(t, Server{Name: "everything", Type: Stdio, Command: "node", Args: []string{entry, "stdio"}})
	tool, ok := m.Tool("everything__trigger-long-running-operation")
	if !ok {
		t.Fatal("no long-running operation")
	}
	got := make(chan core.Progress, 16)
	obs, err := tool.Run(context.Background(), core.ToolContext{Progress: func(p core.Progress) { got <- p }}, []byte(`{"duration":1,"steps":3}`))
	if err != nil {
		t.Fatalf("long operation: %v", err)
	}
	for want := 1.0; want <= 2; want++ {
		select {
		case p := <-got:
			if p.Total != 3 || p.Done != want {
				t.Fatalf("progress %+v, want %v of 3", p, want)
			}
		case <-time.After(20 * time.Second): // awaiting an event
			t.Fatalf("no progress %v of 3 (result %q)", want, obs.Text)
		}
	}
	for _, name := range []string{"everything__trigger-elicitation-request", "everything__trigger-sampling-request"} {
		if _, ok := m.Tool(name); ok {
			t.Errorf("%s offered: the server thinks Marlowe can answer it", name)
		}
	}
}
