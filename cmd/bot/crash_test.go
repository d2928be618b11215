//go:build unix

package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/internal/testport"
	"github.com/marlowe-bot/marlowe/llm/llmtest"
)

// TestCrashKillAtEveryStep is the crash-safety contract (ARCHITECTURE.md
// section 6) checked on the real binary: a multi-step run (three model
// steps, four tool calls, checklist edits, a post in another channel and a
// final answer) is SIGKILLed after its first, second, ... last journal
// append (and a little after it, in further rounds), each time on a fresh
// data dir. The bot is then restarted on the same data dir without
// anything being said again (the sandbox re-delivers what it stored but
// had not delivered; the engine resumes unfinished runs) and must finish
// the run exactly once: one run.completed, every message posted exactly
// once, no idempotency key used twice, the same commands journaled as in
// an uninterrupted run, and `bot verify` happy with the journal.
func TestCrashKillAtEveryStep(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the bot binary and SIGKILLs it at every journal append of a run (-short skips it)")
	}
	start := time.Now()
	bin := buildCrashBot(t)
	model := newCrashModel(t)

	// A clean run first: how many commands a whole run appends, and what
	// the workspace looks like after it.
	clean := newCrashBot(t, bin, model.url, "clean")
	clean.start()
	clean.say(crashPrompt(clean.token))
	clean.waitRunEnd(30 * time.Second)
	clean.interrupt()
	want := clean.check()
	total := clean.count()
	t.Logf("clean run: %d commands: %s", total, strings.Join(clean.kinds(), " "))

	// Then the kill loop: after append n (n = 0 kills as soon as the
	// sandbox has stored the message; n = total kills a finished run), in
	// rounds that kill a little later after the append each time.
	died := map[int]int{} // commands in the journal at death -> iterations
	var reasked, reposted int
	iteration := func(name string, n int, delay time.Duration) int {
		b := newCrashBot(t, bin, model.url, name)
		defer b.close()
		b.start()
		at := b.killAt(n, delay)
		died[at]++
		// A kill between a post and its message.posted leaves the sandbox
		// with more of the bot's messages than the journal records: the
		// restart must re-issue them under the same keys.
		if b.botPosts() > b.countKind("message.posted") {
			reposted++
		}
		b.start()
		b.waitRunEnd(30 * time.Second)
		b.interrupt()
		got := b.check()
		if !maps.Equal(got, want) {
			t.Errorf("killed after %d (died at %d): journal kinds %v, want those of the clean run %v", n, at, got, want)
		}
		if model.calls(b.token) > 3 {
			reasked++ // died between a model call and its model.step
		}
		b.verify()
		if strings.Contains(b.logs.String(), "level=ERROR") {
			t.Errorf("killed after %d (died at %d): the bot logged errors", n, at)
		}
		if t.Failed() {
			t.Fatalf("killed after %d (died at %d): bot logs:\n%s", n, at, b.logs.String())
		}
		return at
	}
	for round, delay := range crashDelays {
		for n := 0; n <= total; n++ {
			iteration(fmt.Sprintf("r%dn%d", round, n), n, delay)
		}
	}
	// Dying before anything was journaled is the one point where the
	// restart depends on the sandbox delivering the message again; the
	// window is short, so it gets a few more tries.
	for i := 0; died[0] == 0 && i < 10; i++ {
		iteration(fmt.Sprintf("z%d", i), 0, 0)
	}
	points := slices.Sorted(maps.Keys(died))
	var dist []string
	for _, p := range points {
		dist = append(dist, fmt.Sprintf("%d×%d", p, died[p]))
	}
	t.Logf("killed at %d distinct journal lengths of 0..%d (length×kills): %s", len(points), total, strings.Join(dist, " "))
	t.Logf("kills between a post and its record: %d; between a model call and its step: %d", reposted, reasked)
	t.Logf("took %s", time.Since(start).Round(100*time.Millisecond))
	if len(points) < total/2 {
		t.Errorf("the kills landed at only %d distinct journal lengths of %d", len(points), total+1)
	}
	if died[0] == 0 {
		t.Errorf("no kill landed before the message was journaled")
	}
	if reposted == 0 {
		t.Errorf("no kill landed between a post and its record")
	}
}

// crashPrompt is what Alice says: it names #random (so posting there needs
// no approval) and carries a token the answer must repeat.
func crashPrompt(token string) string {
	return "<@marlowe> please read this thread, post a note to #random and answer with the code " + token
}

var crashTokenRe = regexp.MustCompile(`\bK-[a-z0-9]+\b`)

// crashStep is how long the bot runs between two looks at its journal
// while killAt waits for the count (it is stopped while we look).
const crashStep = 100 * time.Microsecond

// crashDelays are the rounds of the kill loop: how long after the append
// the bot is killed. Later kills land inside what the bot does next (a
// post before its record, a model call before its step).
var crashDelays = []time.Duration{0, crashStep, 3 * crashStep, 10 * crashStep}

// ---- the bot binary ----

// buildCrashBot builds ./cmd/bot into a temporary directory, without -race
// and with the default build settings, so that the packages go vet and go
// build compiled are reused from the build cache: the binary is the
// subject, killed and restarted a hundred times, not the checked code.
func buildCrashBot(t testing.TB) string {
	t.Helper()
	builtBot.once.Do(func() {
		goBin, err := exec.LookPath("go")
		if err != nil {
			builtBot.err = fmt.Errorf("the go command is needed to build the bot: %w", err)
			return
		}
		if builtBot.dir, err = os.MkdirTemp("", "marlowe-bot-"); err != nil {
			builtBot.err = err
			return
		}
		builtBot.path = filepath.Join(builtBot.dir, "bot")
		cmd := exec.Command(goBin, "build", "-buildvcs=false", "-o", builtBot.path, ".")
		if out, err := cmd.CombinedOutput(); err != nil {
			builtBot.err = fmt.Errorf("go build ./cmd/bot: %w\n%s", err, out)
		}
	})
	if builtBot.err != nil {
		t.Fatal(builtBot.err)
	}
	return builtBot.path
}

// builtBot is the bot binary the process tests run: built once per test
// binary (every test used to build its own, about 20 builds a run), and
// removed by TestMain.
var builtBot struct {
	once      sync.Once
	dir, path string
	err       error
}

func TestMain(m *testing.M) {
	flag.Parse()
	// The process tests mostly wait on the bots they start (paced posts,
	// leases lapsing, a model's pauses), so more of them than cores run
	// at once unless -parallel says otherwise.
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })
	if !explicit {
		_ = flag.Set("test.parallel", "4")
	}
	code := m.Run()
	if builtBot.dir != "" {
		_ = os.RemoveAll(builtBot.dir)
	}
	os.Exit(code)
}

// ---- the model ----

// crashModel is an OpenAI-compatible chat endpoint whose answer is a pure
// function of the request (never a queue): a bot that crashed before
// journaling a step asks again and gets the same kind of answer.
//
//	no tool result yet   → update_checklist (plan) + read_thread
//	two tool results     → update_checklist (progress) + post_to_channel #random
//	four tool results    → the final answer, repeating the prompt's token
type crashModel struct {
	url string
	mu  sync.Mutex
	n   map[string]int // calls per token
}

func newCrashModel(t *testing.T) *crashModel {
	m := &crashModel{n: map[string]int{}}
	srv := httptest.NewServer(http.HandlerFunc(m.serve))
	t.Cleanup(srv.Close)
	m.url = srv.URL + "/v1"
	return m
}

func (m *crashModel) calls(token string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.n[token]
}

func (m *crashModel) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/chat/completions") {
		http.Error(w, `{"error":{"message":"not found"}}`, http.StatusNotFound)
		return
	}
	var req llmtest.OpenAIChatRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, `{"error":{"message":"bad json"}}`, http.StatusBadRequest)
		return
	}
	token, results := crashRequest(req)
	m.mu.Lock()
	m.n[token]++
	m.mu.Unlock()
	type call struct{ id, name, args string }
	var text string
	var calls []call
	switch results {
	case 0:
		calls = []call{
			{"call_plan", "update_checklist", `{"items":[{"text":"Read the thread"},{"text":"Post a note to #random"},{"text":"Answer"}]}`},
			{"call_read", "read_thread", `{}`},
		}
	case 2:
		calls = []call{
			{"call_progress", "update_checklist", `{"items":[{"text":"Read the thread","done":true},{"text":"Post a note to #random"},{"text":"Answer"}]}`},
			{"call_note", "post_to_channel", `{"channel":"random","text":"A note from the thread about ` + token + `"}`},
		}
	case 4:
		text = "Done: the code is " + token + "."
	default:
		text = fmt.Sprintf("unexpected request with %d tool results", results)
	}
	msg := map[string]any{"role": "assistant", "content": text}
	finish := "stop"
	if len(calls) > 0 {
		finish, msg["content"] = "tool_calls", nil
		var tcs []map[string]any
		for _, c := range calls {
			tcs = append(tcs, map[string]any{"id": c.id, "type": "function",
				"function": map[string]any{"name": c.name, "arguments": c.args}})
		}
		msg["tool_calls"] = tcs
	}
	writeCompletion(w, req.Model, msg, finish)
}

// crashRequest reads the prompt's token and how many tool results the
// request carries: what the crash models answer on.
func crashRequest(req llmtest.OpenAIChatRequest) (token string, results int) {
	for _, msg := range req.Messages {
		switch msg.Role {
		case "user":
			if token == "" {
				token = crashTokenRe.FindString(msg.Text())
			}
		case "tool":
			results++
		}
	}
	return token, results
}

// writeCompletion answers a chat completion with msg.
func writeCompletion(w http.ResponseWriter, model string, msg map[string]any, finish string) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"id": "chatcmpl-crash", "object": "chat.completion", "created": time.Now().Unix(), "model": model,
		"choices": []map[string]any{{"index": 0, "message": msg, "finish_reason": finish, "logprobs": nil}},
		"usage":   map[string]any{"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110},
	})
}

// ---- one bot, on one data dir, across its restarts ----

type crashBot struct {
	t       *testing.T
	bin     string
	dir     string
	token   string
	env     []string
	sandbox string // http://127.0.0.1:PORT (fixed across restarts)
	logs    *syncBuffer
	db      *sql.DB

	cmd    *exec.Cmd
	exited chan struct{}
	err    error // of cmd.Wait, once exited is closed
}

func newCrashBot(t *testing.T, bin, modelURL, name string) *crashBot {
	t.Helper()
	dir := t.TempDir()
	// Both listeners on ports chosen here: with the HTTP port left to the
	// kernel, a restart could be handed the sandbox port its predecessor
	// just freed, and the sandbox would fail to bind.
	port, httpPort := crashFreePort(t), crashFreePort(t)
	for httpPort == port {
		httpPort = crashFreePort(t)
	}
	b := &crashBot{
		t: t, bin: bin, dir: dir, token: "K-" + strings.ToLower(strconv.FormatInt(time.Now().UnixNano(), 36)) + name,
		sandbox: "http://127.0.0.1:" + port,
		logs:    &syncBuffer{},
		env: []string{
			"HOME=" + dir,
			"MARLOWE_DATA_DIR=" + dir,
			"MARLOWE_HTTP_ADDR=127.0.0.1:" + httpPort,
			"MARLOWE_SANDBOX_ADDR=127.0.0.1:" + port,
			// check counts the checklist message: these runs keep to it.
			"MARLOWE_SANDBOX_STREAM=0",
			"MARLOWE_MODEL_PROVIDER=openai",
			"MARLOWE_MODEL=fake",
			"MARLOWE_MODEL_BASE_URL=" + modelURL,
			"MARLOWE_MODEL_TIMEOUT=10s",
			"MARLOWE_LOG_LEVEL=debug",
		},
	}
	t.Cleanup(b.close)
	return b
}

// crashFreePort picks a loopback port nothing listens on, so that a restarted
// bot serves the sandbox at the same address.
func crashFreePort(t *testing.T) string {
	t.Helper()
	return testport.FreeString(t)
}

// start runs the binary and waits until the sandbox is up.
func (b *crashBot) start() {
	b.t.Helper()
	if b.cmd != nil {
		b.t.Fatal("bot already running")
	}
	fmt.Fprintf(b.logs, "==== start\n")
	mark := len(b.logs.String())
	cmd := exec.Command(b.bin, "serve")
	cmd.Env = b.env
	cmd.Stdout, cmd.Stderr = b.logs, b.logs
	if err := cmd.Start(); err != nil {
		b.t.Fatal(err)
	}
	b.cmd, b.exited = cmd, make(chan struct{})
	go func() {
		b.err = cmd.Wait()
		close(b.exited)
	}()
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if strings.Contains(b.logs.String()[mark:], "sandbox ready") {
			return
		}
		select {
		case <-b.exited:
			b.cmd = nil
			b.t.Fatalf("bot exited during start-up (%v):\n%s", b.err, b.logs.String())
		default:
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("bot did not start:\n%s", b.logs.String())
		}
	}
}

// say posts a message as Alice in #general through the sandbox's API.
func (b *crashBot) say(text string) {
	b.t.Helper()
	b.sayAs("alice", text)
}

// sayAs posts a message as person in #general through the sandbox's API.
func (b *crashBot) sayAs(person, text string) {
	b.t.Helper()
	body, _ := json.Marshal(map[string]string{"person": person, "channel": "general", "text": text})
	req, _ := http.NewRequestWithContext(b.t.Context(), http.MethodPost, b.sandbox+"/api/messages", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Origin", b.sandbox)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		b.t.Fatalf("post message: %s", resp.Status)
	}
}

// killAt SIGKILLs the bot once the journal holds n commands, after
// letting it run for delay more, and returns how many commands the journal
// held when the process was dead. To kill close to the append, the bot is
// single-stepped: it runs for crashStep, is stopped (SIGSTOP) while the
// journal is counted, and resumed (SIGCONT) while the count is short; a
// stopped process killed is a process killed wherever it was.
//
// n = 0 says the message itself, and kills the bot as soon as the sandbox
// has stored it: usually before it is journaled, so that the restart
// depends on the sandbox delivering it again.
func (b *crashBot) killAt(n int, delay time.Duration) int {
	b.t.Helper()
	p := b.cmd.Process
	reached := func() (bool, error) {
		var c int
		if err := b.journal().QueryRow(`SELECT count(*) FROM commands`).Scan(&c); err != nil {
			// A reader can find the WAL index mid-update while the writer
			// is stopped (SQLITE_PROTOCOL): let it run and look again.
			return false, err
		}
		return c >= n, nil
	}
	said := make(chan struct{})
	if n == 0 {
		reached = func() (bool, error) {
			for _, m := range b.messages() {
				if !m.Bot {
					return true, nil
				}
			}
			return false, nil
		}
		go func() {
			defer close(said)
			body, _ := json.Marshal(map[string]string{"person": "alice", "channel": "general", "text": crashPrompt(b.token)})
			req, _ := http.NewRequest(http.MethodPost, b.sandbox+"/api/messages", bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Origin", b.sandbox)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close() // or killed before it answered
			}
		}()
	} else {
		close(said)
		b.say(crashPrompt(b.token))
	}
	deadline := time.Now().Add(30 * time.Second)
	var lastErr error
	for {
		_ = p.Signal(syscall.SIGSTOP)
		ok, err := reached()
		if ok {
			break
		}
		slice := crashStep
		if err != nil {
			// The look itself failed (SQLITE_PROTOCOL: the WAL index was
			// mid-update when the bot stopped), after SQLite's own retries
			// kept the bot stopped a while: let it run long enough to finish
			// that write, or single-stepping starves it under load.
			lastErr, slice = err, 20*time.Millisecond
		}
		select {
		case <-b.exited:
			b.cmd = nil
			b.t.Fatalf("bot exited on its own (%v):\n%s", b.err, b.logs.String())
		default:
		}
		if time.Now().After(deadline) {
			_ = p.Signal(syscall.SIGCONT)
			b.t.Fatalf("the journal never reached %d commands (has %d, last error %v):\n%s", n, b.count(), lastErr, b.logs.String())
		}
		_ = p.Signal(syscall.SIGCONT)
		time.Sleep(slice)
	}
	if delay > 0 {
		_ = p.Signal(syscall.SIGCONT)
		time.Sleep(delay)
	}
	b.kill()
	<-said
	return b.count()
}

func (b *crashBot) kill() {
	if b.cmd == nil {
		return
	}
	_ = b.cmd.Process.Signal(syscall.SIGKILL)
	<-b.exited
	b.cmd = nil
	fmt.Fprintf(b.logs, "==== killed\n")
}

// interrupt stops the bot as an operator would (SIGINT) and expects a
// clean exit.
func (b *crashBot) interrupt() {
	b.t.Helper()
	if b.cmd == nil {
		return
	}
	_ = b.cmd.Process.Signal(os.Interrupt)
	select {
	case <-b.exited:
	case <-time.After(20 * time.Second):
		b.kill()
		b.t.Fatalf("bot did not stop on SIGINT:\n%s", b.logs.String())
	}
	b.cmd = nil
	if b.err != nil {
		b.t.Errorf("bot exited with %v after SIGINT:\n%s", b.err, b.logs.String())
	}
}

// close kills a bot still running and closes the journal reader.
func (b *crashBot) close() {
	b.kill()
	if b.db != nil {
		_ = b.db.Close()
		b.db = nil
	}
}

// journal opens the bot's SQLite journal for reading, beside the bot (WAL
// lets readers in while it writes), once the bot has created it.
func (b *crashBot) journal() *sql.DB {
	b.t.Helper()
	if b.db != nil {
		return b.db
	}
	path := filepath.Join(b.dir, "marlowe.db")
	if _, err := os.Stat(path); err != nil {
		b.t.Fatalf("no journal yet: %v", err)
	}
	// A short busy timeout: the bot may be stopped holding a lock.
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(200)&_pragma=query_only(1)")
	if err != nil {
		b.t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	b.db = db
	return db
}

func (b *crashBot) count() int {
	b.t.Helper()
	var n int
	var err error
	for range 50 {
		if err = b.journal().QueryRow(`SELECT count(*) FROM commands`).Scan(&n); err == nil {
			return n
		}
		time.Sleep(10 * time.Millisecond)
	}
	b.t.Fatal(err)
	return 0
}

func (b *crashBot) countKind(kind string) int {
	b.t.Helper()
	var n int
	var err error
	for range 50 { // as count: a reader can meet a WAL the kill left mid-write
		if err = b.journal().QueryRow(`SELECT count(*) FROM commands WHERE kind = ?`, kind).Scan(&n); err == nil {
			return n
		}
		time.Sleep(10 * time.Millisecond)
	}
	b.t.Fatal(err)
	return 0
}

// kinds lists the journal's commands by kind, in append order.
func (b *crashBot) kinds() []string {
	b.t.Helper()
	rows, err := b.journal().Query(`SELECT kind FROM commands ORDER BY rowid`)
	if err != nil {
		b.t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			b.t.Fatal(err)
		}
		out = append(out, k)
	}
	if err := rows.Err(); err != nil {
		b.t.Fatal(err)
	}
	return out
}

// waitRunEnd waits until the run has ended in the journal.
func (b *crashBot) waitRunEnd(timeout time.Duration) {
	b.t.Helper()
	for deadline := time.Now().Add(timeout); ; time.Sleep(10 * time.Millisecond) {
		var n int
		if err := b.journal().QueryRow(`SELECT count(*) FROM commands WHERE kind IN ('run.completed', 'run.failed')`).Scan(&n); err != nil {
			b.t.Fatal(err)
		}
		if n > 0 {
			return
		}
		select {
		case <-b.exited:
			b.cmd = nil
			b.t.Fatalf("bot exited before the run ended (%v):\n%s", b.err, b.logs.String())
		default:
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("the run did not end within %s; journal: %v\n%s", timeout, b.kinds(), b.logs.String())
		}
	}
}

// verify runs `bot verify` on the data dir.
func (b *crashBot) verify() {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.t.Context(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, b.bin, "verify")
	cmd.Env = b.env
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "ok: ") {
		b.t.Errorf("bot verify: %v\n%s", err, out)
	}
}

// crashMsg is a message of the sandbox's data file (its latest revision).
type crashMsg struct {
	ID, Channel, Thread, Author, Text, Key, State string
	Bot                                           bool
	Card                                          *core.Card
	Decision                                      *struct {
		Route  bool
		Reason string
	}
}

func (b *crashBot) messages() []crashMsg {
	b.t.Helper()
	raw, err := os.ReadFile(filepath.Join(b.dir, "sandbox.jsonl"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		b.t.Fatal(err)
	}
	latest := map[string]crashMsg{}
	var order []string
	for line := range strings.Lines(string(raw)) {
		var rec struct{ Msg *crashMsg }
		if json.Unmarshal([]byte(line), &rec) != nil || rec.Msg == nil {
			continue
		}
		if _, seen := latest[rec.Msg.ID]; !seen {
			order = append(order, rec.Msg.ID)
		}
		latest[rec.Msg.ID] = *rec.Msg
	}
	out := make([]crashMsg, 0, len(order))
	for _, id := range order {
		out = append(out, latest[id])
	}
	return out
}

// botPosts counts the bot's messages in the sandbox.
func (b *crashBot) botPosts() int {
	n := 0
	for _, m := range b.messages() {
		if m.Bot {
			n++
		}
	}
	return n
}

// check asserts the exactly-once outcome on the stopped bot's data dir and
// returns the journal's command counts by kind (the ones a crash must not
// change).
func (b *crashBot) check() map[string]int {
	t := b.t
	t.Helper()
	ms := b.messages()
	dump := func() string {
		var s strings.Builder
		for _, m := range ms {
			fmt.Fprintf(&s, "  %s #%s thread=%s %s key=%s state=%s: %q\n", m.ID, m.Channel, m.Thread, m.Author, m.Key, m.State, m.Text)
		}
		return s.String()
	}
	var asked *crashMsg
	keys := map[string]string{}
	var answers, checklists, notes, bot int
	for i, m := range ms {
		if !m.Bot {
			if asked != nil {
				t.Errorf("more than one message from a person:\n%s", dump())
			}
			asked = &ms[i]
			continue
		}
		bot++
		if m.Key == "" {
			t.Errorf("bot message %s has no idempotency key", m.ID)
		} else if other, dup := keys[m.Key]; dup {
			t.Errorf("bot messages %s and %s share idempotency key %s", other, m.ID, m.Key)
		}
		keys[m.Key] = m.ID
		switch {
		case m.Channel == "random":
			if strings.Contains(m.Text, b.token) {
				notes++
			}
		case strings.Contains(m.Text, "Done: the code is "+b.token+"."):
			answers++
		case strings.HasPrefix(m.Text, "✅ Done"), strings.HasPrefix(m.Text, "⏳"):
			checklists++
			if want := "✅ Done\n☑ Read the thread\n☑ Post a note to #random\n☑ Answer"; !strings.HasPrefix(m.Text, want) {
				t.Errorf("checklist does not show the finished plan: %q", m.Text)
			}
		}
	}
	if asked == nil {
		t.Fatalf("Alice's message is missing:\n%s", dump())
	}
	if asked.State != "delivered" || asked.Decision == nil || !asked.Decision.Route {
		t.Errorf("Alice's message: state %q, decision %+v", asked.State, asked.Decision)
	}
	for _, m := range ms {
		if m.Bot && m.Channel == "general" && m.Thread != asked.ID {
			t.Errorf("bot message %s outside the thread of Alice's message", m.ID)
		}
	}
	if answers != 1 || checklists != 1 || notes != 1 || bot != 3 {
		t.Errorf("bot posts: %d answers, %d checklists, %d notes in #random, %d in all; want one each, 3 in all:\n%s", answers, checklists, notes, bot, dump())
	}

	counts := map[string]int{}
	for _, k := range b.kinds() {
		counts[k]++
	}
	for kind, n := range map[string]int{"message.received": 1, "run.started": 1, "run.completed": 1, "model.step": 3, "tool.completed": 4, "message.posted": 3} {
		if counts[kind] != n {
			t.Errorf("journal has %d %s, want %d (all: %v)", counts[kind], kind, n, counts)
		}
	}
	return counts
}
