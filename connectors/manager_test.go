package connectors

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
)

var testServerBin string

func TestMain(m *testing.M) {
	if os.Getenv("CONNECTORS_HELPER") == "1" {
		helperParent()
		return
	}
	dir, err := os.MkdirTemp("", "mcp-testserver")
	if err != nil {
		panic(err)
	}
	testServerBin = filepath.Join(dir, "testserver")
	if out, err := exec.Command("go", "build", "-o", testServerBin, "./internal/testserver").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building the test server: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// states collects a manager's state changes so tests await them.
type states chan State

func (s states) await(t *testing.T, what string, ok func(State) bool) State {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case st := <-s:
			if ok(st) {
				return st
			}
		case <-timeout:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// start runs servers (name → extra env for the test server) and waits
// until each has connected or failed once.
func start(t *testing.T, servers map[string]map[string]string, opts Options) (*Manager, states) {
	t.Helper()
	cfg := &Config{File: "test.json", FindToolAfter: DefaultFindToolAfter}
	for name, env := range servers {
		cfg.Servers = append(cfg.Servers, Server{Name: name, Type: Stdio, Command: testServerBin, Env: env, Timeout: 20 * time.Second})
	}
	return startConfig(t, cfg, opts)
}

// startConfig runs cfg's servers and waits until each has connected or
// failed once.
func startConfig(t *testing.T, cfg *Config, opts Options) (*Manager, states) {
	t.Helper()
	ch := make(states, 256)
	opts.OnState = func(s State) {
		select {
		case ch <- s:
		default:
		}
	}
	if opts.MinBackoff == 0 {
		opts.MinBackoff = 50 * time.Millisecond
	}
	m := New(cfg, opts)
	m.Start(context.Background())
	t.Cleanup(func() { _ = m.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := m.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	return m, ch
}

func call(t *testing.T, ctx context.Context, m *Manager, name, args string) (core.Observation, error) {
	t.Helper()
	tool, ok := m.Tool(name)
	if !ok {
		t.Fatalf("no tool %s", name)
	}
	return tool.Run(ctx, core.ToolContext{}, json.RawMessage(args))
}

func TestGoServerToolsAreNamedPaginatedAndJudgedByAnnotations(t *testing.T) {
	m, _ := start(t, map[string]map[string]string{"t": nil, "u-2": nil}, Options{})
	tools := m.ToolsIn("slack/T1/C1")
	if len(tools) != 24 { // 12 each, listed 3 to a page
		t.Fatalf("offered %d tools, want 24", len(tools))
	}
	want := map[string]core.Consequence{"t__echo": core.Read, "t__hang": core.Write, "t__crash": core.Irreversible, "u-2__echo": core.Read}
	for name, c := range want {
		tool, ok := m.Tool(name)
		if !ok || tool.Consequence != c || tool.Connector == nil {
			t.Errorf("%s: %+v, want consequence %s", name, tool, c)
		}
	}
	obs, err := call(t, context.Background(), m, "t__echo", `{"text":"hi"}`)
	if err != nil || obs.Text != "hi" || obs.Trust != core.Untrusted {
		t.Errorf("echo: %+v %v", obs, err)
	}
}

func TestResultsAreCappedSummarisedAndErrorsFail(t *testing.T) {
	m, _ := start(t, map[string]map[string]string{"t": nil}, Options{ResultCap: 1000})
	obs, err := call(t, context.Background(), m, "t__huge", `{"n":5000000}`)
	if err != nil {
		t.Fatal(err)
	}
	if len(obs.Text) > 1300 || !strings.Contains(obs.Text, "cut at 1000 bytes") || !strings.Contains(obs.Text, "5000000 bytes") {
		t.Errorf("huge result not capped with the cap stated: %d bytes, tail %q", len(obs.Text), obs.Text[max(0, len(obs.Text)-200):])
	}
	obs, err = call(t, context.Background(), m, "t__mixed", `{}`)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"hello", "[image: image/png, 1234 bytes", "[embedded resource: file:///a.bin (application/octet-stream, 99 bytes)", `structuredContent: {"answer":42}`} {
		if !strings.Contains(obs.Text, w) {
			t.Errorf("mixed result %q lacks %q", obs.Text, w)
		}
	}
	_, err = call(t, context.Background(), m, "t__fail", `{}`)
	var te *ToolError
	if !errors.As(err, &te) || !strings.Contains(err.Error(), "no such issue") || !strings.Contains(err.Error(), "<untrusted-content") {
		t.Errorf("isError: %v", err)
	}
}

func TestEnvironmentIsolation(t *testing.T) {
	secrets := map[string]string{
		"MARLOWE_SIGNING_KEY": "sk-signing-secret", "MARLOWE_SLACK_BOT_TOKEN": "xoxb-secret",
		"OPENAI_API_KEY": "sk-model-secret", "MARLOWE_DATABASE_URL": "postgres://u:dbsecret@h/db",
		"MARLOWE_REDIS_URL": "redis://:redissecret@h", "GITHUB_TOKEN": "ghp_notforyou",
	}
	for k, v := range secrets {
		t.Setenv(k, v)
	}
	m, _ := start(t, map[string]map[string]string{"t": {"GIVEN": "configured-value"}}, Options{})
	obs, err := call(t, context.Background(), m, "t__env", `{}`)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range secrets {
		if strings.Contains(obs.Text, v) || strings.Contains(obs.Text, k+"=") {
			t.Errorf("the server sees %s", k)
		}
	}
	if !strings.Contains(obs.Text, "GIVEN=configured-value") || !strings.Contains(obs.Text, "PATH=") {
		t.Errorf("env lacks the configured or baseline variables: %q", obs.Text)
	}
	for _, line := range strings.Split(obs.Text, "\n") {
		k, _, _ := strings.Cut(line, "=")
		switch k {
		case "PATH", "HOME", "LANG", "TMPDIR", "GIVEN", "":
		default:
			t.Errorf("unexpected variable %s reached the server", k)
		}
	}
}

func TestCancellationReachesTheServer(t *testing.T) {
	marks := t.TempDir()
	m, _ := start(t, map[string]map[string]string{"t": {"TESTSERVER_MARKS": marks}}, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := call(t, ctx, m, "t__hang", `{"text":"job-1"}`)
		errc <- err
	}()
	awaitFile(t, filepath.Join(marks, "hang-started"))
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("call error = %v, want context.Canceled", err)
	}
	// The server's handler saw its context cancelled: notifications/cancelled arrived.
	awaitFile(t, filepath.Join(marks, "hang-cancelled"))
}

func TestCrashedServerRestartsAndCallsFailFastWhileDown(t *testing.T) {
	m, st := start(t, map[string]map[string]string{"t": nil}, Options{MinBackoff: 300 * time.Millisecond})
	pid1, _ := call(t, context.Background(), m, "t__pid", `{}`)
	if _, err := call(t, context.Background(), m, "t__crash", `{}`); err == nil {
		t.Fatal("a call whose server died mid-call succeeded")
	}
	down := st.await(t, "down", func(s State) bool { return s.Status == "down" })
	if !strings.Contains(strings.Join(down.Stderr, "\n"), "crashing on purpose") {
		t.Errorf("down state lacks the server's last stderr: %+v", down)
	}
	if _, err := call(t, context.Background(), m, "t__echo", `{"text":"x"}`); !errors.Is(err, ErrDown) {
		t.Errorf("call while down = %v, want ErrDown", err)
	}
	st.await(t, "ready again", func(s State) bool { return s.Status == "ready" })
	pid2, err := call(t, context.Background(), m, "t__pid", `{}`)
	if err != nil || pid2.Text == pid1.Text {
		t.Errorf("after restart: pid %q (before %q), %v", pid2.Text, pid1.Text, err)
	}
}

func TestToolListChangedRefreshes(t *testing.T) {
	m, st := start(t, map[string]map[string]string{"t": nil}, Options{})
	before, _ := m.Tool("t__echo")
	if _, err := call(t, context.Background(), m, "t__mutate", `{}`); err != nil {
		t.Fatal(err)
	}
	st.await(t, "refreshed list", func(State) bool { _, ok := m.Tool("t__added"); return ok })
	after, _ := m.Tool("t__echo")
	if after.Connector.Definition == before.Connector.Definition || after.Consequence != core.Irreversible {
		t.Errorf("echo after the rug pull: %+v (before %+v)", after.Connector, before.Connector)
	}
}

func TestSlowAndBrokenServersDoNotHoldUpOthers(t *testing.T) {
	cfg := &Config{File: "test.json", Servers: []Server{
		{Name: "slow", Type: Stdio, Command: testServerBin, Env: map[string]string{"TESTSERVER_SLOW_START": "1h"}, Timeout: time.Hour},
		{Name: "broken", Type: Stdio, Command: testServerBin, Env: map[string]string{"TESTSERVER_FAIL_START": "fatal: GITHUB_TOKEN is invalid"}, Timeout: time.Second},
		{Name: "ok", Type: Stdio, Command: testServerBin, Timeout: time.Second},
		{Name: "off", Type: Stdio, Command: "/nonexistent", Disabled: true},
	}}
	ch := make(states, 64)
	m := New(cfg, Options{MinBackoff: time.Hour, OnState: func(s State) { ch <- s }})
	m.Start(context.Background())
	by := map[string]State{}
	ch.await(t, "ok ready and broken down", func(State) bool {
		for _, s := range m.States() {
			by[s.Name] = s
		}
		return by["ok"].Status == "ready" && by["broken"].Status == "down"
	})
	if by["slow"].Status != "starting" || by["off"].Status != "disabled" {
		t.Errorf("states: %+v", by)
	}
	if !strings.Contains(strings.Join(by["broken"].Stderr, "\n"), "GITHUB_TOKEN is invalid") {
		t.Errorf("broken server's stderr not kept: %+v", by["broken"])
	}
	if len(m.ToolsIn("x/y/z")) != 12 {
		t.Errorf("tools = %d, want ok's 12", len(m.ToolsIn("x/y/z")))
	}
	done := make(chan struct{})
	go func() { _ = m.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("Close waited on a server that never started")
	}
}

func TestChannelsLimitWhereAServerIsOffered(t *testing.T) {
	cfg := &Config{File: "t.json", Servers: []Server{{Name: "t", Type: Stdio, Command: testServerBin, Channels: []string{"C1"}, Include: []string{"echo", "e*"}, Exclude: []string{"env"}, Timeout: time.Second}}}
	m := New(cfg, Options{})
	m.Start(context.Background())
	defer m.Close()
	if err := m.WaitReady(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := m.ToolsIn("slack/T/C1"); len(got) != 1 || got[0].Name != "t__echo" {
		t.Errorf("C1 tools: %v", got)
	}
	if got := m.ToolsIn("slack/T/C2"); len(got) != 0 {
		t.Errorf("C2 tools: %v", got)
	}
	if m.Offered("slack/T/C2", "t__echo") || !m.Offered("slack/T/C1", "t__echo") {
		t.Error("Offered disagrees with channels")
	}
}

func TestNoOrphansAfterClose(t *testing.T) {
	m, _ := start(t, map[string]map[string]string{"t": nil}, Options{})
	pid := pidOf(t, m, "t__pid")
	grandchild := pidOf(t, m, "t__spawn")
	_ = m.Close()
	for _, p := range []int{pid, grandchild} {
		awaitGone(t, p)
	}
}

// TestNoOrphansAfterSIGKILLOfTheParent runs a parent process holding a
// Manager, kills it with SIGKILL and checks its server died too.
func TestNoOrphansAfterSIGKILLOfTheParent(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "CONNECTORS_HELPER=1", "CONNECTORS_TESTSERVER="+testServerBin)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var pid int
	if _, err := fmt.Fscanln(out, &pid); err != nil {
		t.Fatal("reading the server's pid:", err)
	}
	if !alive(pid) {
		t.Fatal("the server is not running")
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	awaitGone(t, pid)
}

// helperParent is the process TestNoOrphansAfterSIGKILLOfTheParent kills.
func helperParent() {
	cfg := &Config{File: "t.json", Servers: []Server{{Name: "t", Type: Stdio, Command: os.Getenv("CONNECTORS_TESTSERVER"), Env: map[string]string{"TESTSERVER_IGNORE_EOF": "1"}, Timeout: 10 * time.Second}}}
	m := New(cfg, Options{})
	m.Start(context.Background())
	_ = m.WaitReady(context.Background())
	tool, ok := m.Tool("t__pid")
	if !ok {
		os.Exit(2)
	}
	obs, err := tool.Run(context.Background(), core.ToolContext{}, json.RawMessage(`{}`))
	if err != nil {
		os.Exit(3)
	}
	fmt.Println(obs.Text)
	select {}
}

func pidOf(t *testing.T, m *Manager, tool string) int {
	t.Helper()
	obs, err := call(t, context.Background(), m, tool, `{}`)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(obs.Text))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// alive: the process exists and is not a zombie waiting to be reaped.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return syscall.Kill(pid, 0) == nil
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

func awaitGone(t *testing.T, pid int) {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if !alive(pid) {
			return
		}
	}
	t.Errorf("process %d outlived its parent's connector", pid)
}

func awaitFile(t *testing.T, path string) {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			return
		}
	}
	t.Fatalf("%s never appeared", path)
}

// Every call reaches Options.Observe (the metrics hook) with its server,
// the server's own tool name and its outcome.
func TestObserveReportsEachCallsOutcome(t *testing.T) {
	type seen struct{ server, tool, outcome string }
	got := make(chan seen, 16)
	// No restart within the test: the call after the crash finds the server down.
	opts := Options{MinBackoff: time.Hour, Observe: func(server, tool string, _ time.Duration, outcome string) { got <- seen{server, tool, outcome} }}
	marks := t.TempDir()
	m, st := start(t, map[string]map[string]string{"t": {"TESTSERVER_MARKS": marks}}, opts)
	expect := func(want seen) {
		t.Helper()
		select {
		case s := <-got:
			if s != want {
				t.Errorf("observed %+v, want %+v", s, want)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("nothing observed, want %+v", want)
		}
	}
	_, _ = call(t, context.Background(), m, "t__echo", `{"text":"x"}`)
	expect(seen{"t", "echo", "ok"})
	_, _ = call(t, context.Background(), m, "t__fail", `{}`)
	expect(seen{"t", "fail", "tool-error"})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { _, err := call(t, ctx, m, "t__hang", `{"text":"observe"}`); errc <- err }()
	awaitFile(t, filepath.Join(marks, "hang-started"))
	cancel()
	<-errc
	expect(seen{"t", "hang", "cancelled"})
	_, _ = call(t, context.Background(), m, "t__crash", `{}`)
	expect(seen{"t", "crash", "error"})
	st.await(t, "down", func(s State) bool { return s.Status == "down" })
	_, _ = call(t, context.Background(), m, "t__echo", `{"text":"x"}`)
	expect(seen{"t", "echo", "down"})
}

// ATTACK (a server that prints its token): servers commonly echo a bad
// credential on failure ("fatal: token ghp_… is invalid"). The token came
// from ${VAR} in the config, so Marlowe knows it is a secret; the stderr
// kept for doctor, /readyz and the "connector down" log shows it masked.
// On the old code every place showed the token verbatim.
func TestServerStderrMasksConfigSecrets(t *testing.T) {
	const token = "ghp_s3cretT0kenValue"
	data := []byte(`{"mcpServers": {"gh": {"command": ` + strconv.Quote(testServerBin) + `,
		"env": {"TESTSERVER_FAIL_START": "fatal: token ${GH_TOKEN} is invalid", "HOST": "${SHORT}"}}}}`)
	cfg, err := Parse("test.json", data, func(k string) string {
		return map[string]string{"GH_TOKEN": token, "SHORT": "dev"}[k]
	})
	if err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	_, st := startConfig(t, cfg, Options{MinBackoff: time.Hour, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	down := st.await(t, "down", func(s State) bool { return s.Status == "down" })
	stderr := strings.Join(down.Stderr, "\n")
	if strings.Contains(stderr, token) || strings.Contains(logs.String(), token) {
		t.Fatalf("the token is shown:\nstderr: %s\nlogs: %s", stderr, logs.String())
	}
	if !strings.Contains(stderr, "fatal: token [redacted] is invalid") {
		t.Errorf("stderr lost the server's message: %q", stderr)
	}
}

// syncBuffer is a bytes.Buffer safe for a logger's goroutines.
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
