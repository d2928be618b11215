package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/internal/testpg"
	"github.com/marlowe-bot/marlowe/llm/llmtest"
	"github.com/marlowe-bot/marlowe/signin"
	"github.com/marlowe-bot/marlowe/signin/signintest"
	"github.com/marlowe-bot/marlowe/vault"
)

// sandboxFeed collects the sandbox's message events (its /api/events stream).
type sandboxFeed struct {
	mu   sync.Mutex
	msgs []string
}

func (f *sandboxFeed) follow(t *testing.T, ctx context.Context, base string) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"api/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				f.mu.Lock()
				f.msgs = append(f.msgs, d)
				f.mu.Unlock()
			}
		}
	}()
}

// await returns the first message event for which match is true.
func (f *sandboxFeed) await(t *testing.T, what string, match func(string) bool) string {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		f.mu.Lock()
		for _, m := range f.msgs {
			if match(m) {
				f.mu.Unlock()
				return m
			}
		}
		f.mu.Unlock()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	t.Fatalf("no %s in the sandbox:\n%s", what, strings.Join(f.msgs, "\n"))
	return ""
}

func (f *sandboxFeed) all() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return strings.Join(f.msgs, "\n")
}

// The whole flow through `bot serve`: a connector in person mode, the
// sandbox, an OpenAI-compatible fake model, the local OAuth 2.1 server and
// a protected go-sdk MCP server. Alice asks in #general; the run parks; the
// thread says whose sign-in it waits for; her DM (and only her DM) gets the
// link; Bob's browser cannot use it after her; she signs in over HTTP; the
// run resumes and the tool runs as her account. Then `connections`,
// `disconnect gh` (revoked at the server) and a search of the log, the
// database and her export for every token the server issued.
func TestSignInEndToEndThroughServeAndTheSandbox(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) { signInEndToEnd(t, "") })
	t.Run("postgres", func(t *testing.T) { signInEndToEnd(t, testpg.New(t)) })
}

func signInEndToEnd(t *testing.T, dbURL string) {
	as := signintest.NewAS(t)
	as.SetUser("alice-at-gh")
	mcpURL := signintest.NewProtectedMCP(t, as)
	model := llmtest.NewOpenAIServer(t)
	model.Enqueue(
		llmtest.Tools(llmtest.Call("c1", "gh__sign_in", `{}`)),
		llmtest.Tools(llmtest.Call("c2", "gh__whoami", `{}`)),
		llmtest.Text("Checked on gh."),
	)
	dir := t.TempDir()
	cfgFile := filepath.Join(dir, "mcp.json")
	if err := os.WriteFile(cfgFile, []byte(`{"mcpServers":{"gh":{"url":"`+mcpURL+`","identity":"person"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	httpAddr := freeAddr(t)
	public := "http://" + httpAddr
	vars := map[string]string{
		"MARLOWE_DATA_DIR": dir, "MARLOWE_HTTP_ADDR": httpAddr, "MARLOWE_PUBLIC_URL": public, "MARLOWE_SANDBOX_ADDR": "127.0.0.1:0",
		"MARLOWE_MCP_CONFIG": cfgFile, "MARLOWE_SECRETS_KEY": vault.NewKey(), "MARLOWE_SANDBOX_STREAM": "0",
		"MARLOWE_MODEL_PROVIDER": "openai", "MARLOWE_MODEL": "fake-model", "MARLOWE_MODEL_BASE_URL": model.URL,
		"MARLOWE_MODEL_MAX_RETRIES": "0", "MARLOWE_LOG_LEVEL": "debug",
	}
	if dbURL != "" {
		vars["MARLOWE_DATABASE_URL"] = dbURL
	}
	ctx, cancel := context.WithCancel(context.Background())
	logs := newLogWatch("sandbox ready")
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"serve"}, env(vars), strings.NewReader(""), io.Discard, logs) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			t.Error("serve did not stop")
		}
	})
	select {
	case err := <-done:
		t.Fatalf("serve stopped: %v\n%s", err, logs)
	case <-logs.seen:
	case <-time.After(30 * time.Second):
		t.Fatalf("serve did not start:\n%s", logs)
	}
	m := regexp.MustCompile(`sandbox ready.*url=(http://127\.0\.0\.1:\d+/)`).FindStringSubmatch(logs.String())
	if m == nil {
		t.Fatalf("no sandbox URL:\n%s", logs)
	}
	sandbox := m[1]
	feed := &sandboxFeed{}
	feed.follow(t, ctx, sandbox)
	say := func(person, channel, text string) {
		t.Helper()
		b, _ := json.Marshal(map[string]string{"person": person, "channel": channel, "text": text})
		resp, err := http.Post(sandbox+"api/messages", "application/json", bytes.NewReader(b))
		if err != nil || resp.StatusCode != http.StatusCreated {
			t.Fatalf("say: %v %v", resp, err)
		}
		resp.Body.Close()
	}
	type msg struct {
		Channel string `json:"channel"`
		Text    string `json:"text"`
		Author  string `json:"author"`
	}
	decode := func(s string) msg {
		var m msg
		_ = json.Unmarshal([]byte(s), &m)
		return m
	}

	say("alice", "general", "<@marlowe> who am I on gh?")
	card := feed.await(t, "the sign-in card in the thread", func(s string) bool {
		return decode(s).Channel == "general" && strings.Contains(s, "Waiting for") && strings.Contains(s, "to connect gh")
	})
	if !strings.Contains(card, "own gh account") {
		t.Errorf("the card does not say whose account: %s", card)
	}
	dm := feed.await(t, "the link in alice's DM", func(s string) bool {
		return decode(s).Channel == "dm-alice" && strings.Contains(s, public+signin.StartPath+"?t=")
	})
	link := regexp.MustCompile(regexp.QuoteMeta(public+signin.StartPath) + `\?t=[A-Za-z0-9_.\-]+`).FindString(decode(dm).Text)
	if link == "" {
		t.Fatalf("no link in %s", dm)
	}
	for _, s := range strings.Split(feed.all(), "\n") {
		if m := decode(s); m.Channel != "dm-alice" && strings.Contains(s, signin.StartPath+"?t=") {
			t.Fatalf("a sign-in link was posted in %s", m.Channel)
		}
	}

	// A browser signs in with a link: the landing page's Continue, the
	// authorization server (signed in as account), back to the callback.
	signInWith := func(link, account string) (int, string) {
		t.Helper()
		as.SetUser(account)
		jar, _ := cookiejar.New(nil)
		u, _ := url.Parse(link)
		resp, err := (&http.Client{Jar: jar}).PostForm(public+signin.StartPath, url.Values{"t": {u.Query().Get("t")}})
		if err != nil {
			t.Fatal(err)
		}
		page, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, string(page)
	}
	type cardMsg struct {
		ID      string     `json:"id"`
		Channel string     `json:"channel"`
		Card    *core.Card `json:"card"`
	}
	confirmCard := func(account string) string {
		t.Helper()
		s := feed.await(t, "alice's confirmation card naming "+account, func(s string) bool {
			var m cardMsg
			_ = json.Unmarshal([]byte(s), &m)
			return m.Channel == "dm-alice" && m.Card != nil && strings.Contains(m.Card.Title, "was it you?") && len(m.Card.Actions) == 2 && strings.Contains(s, account)
		})
		var m cardMsg
		_ = json.Unmarshal([]byte(s), &m)
		return m.ID
	}
	click := func(person, message, action string) int {
		t.Helper()
		b, _ := json.Marshal(map[string]string{"person": person, "message": message, "action": action})
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, sandbox+"api/click", bytes.NewReader(b))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Origin", strings.TrimSuffix(sandbox, "/"))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	reqsBefore, err := model.ChatRequests()
	if err != nil {
		t.Fatal(err)
	}

	// Attack: Bob got hold of Alice's unused link and signs in, in his own
	// browser, with his own account. Before issue 35's fix this connected
	// Bob's account in Alice's name and resumed her run as him.
	u, _ := url.Parse(link)
	if code, page := signInWith(link, "bob-at-gh"); code != 200 || !strings.Contains(page, "Nothing is connected until they confirm") {
		t.Fatalf("bob's sign-in with alice's link: %d %s", code, page)
	}
	// The link is used now: nobody follows it again.
	resp, err := http.PostForm(public+signin.StartPath, url.Values{"t": {u.Query().Get("t")}})
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 400 || !strings.Contains(string(page), "already used") {
		t.Fatalf("the link reused: %d %s", resp.StatusCode, page)
	}
	// Alice is asked, in her DM, on a card naming Bob's account; Bob
	// cannot press it; Alice rejects it.
	bobCard := confirmCard("bob-at-gh")
	if code := click("bob", bobCard, "confirm"); code == http.StatusAccepted {
		t.Fatal("bob pressed the card in alice's DM")
	}
	if code := click("alice", bobCard, "reject"); code != http.StatusAccepted {
		t.Fatalf("alice's reject: %d", code)
	}
	feed.await(t, "the rejection told to alice", func(s string) bool {
		return decode(s).Channel == "dm-alice" && strings.Contains(s, "Not connected")
	})
	_, revokedAtReject := as.Counts()
	if revokedAtReject == 0 {
		t.Error("the rejected sign-in was not revoked at the server")
	}
	// Bob's account never ran for her: the run still waits.
	if strings.Contains(feed.all(), "Checked on gh.") {
		t.Fatal("the run resumed with bob's sign-in")
	}
	if reqs, _ := model.ChatRequests(); len(reqs) != len(reqsBefore) {
		t.Fatalf("the run went on after bob's sign-in: %d model requests, were %d", len(reqs), len(reqsBefore))
	}

	// Alice asks for a new link and signs in herself, then confirms.
	say("alice", "dm-alice", "connect gh")
	dm2 := feed.await(t, "a new link in alice's DM", func(s string) bool {
		return decode(s).Channel == "dm-alice" && strings.Contains(s, public+signin.StartPath+"?t=") && !strings.Contains(s, u.Query().Get("t"))
	})
	link2 := regexp.MustCompile(regexp.QuoteMeta(public+signin.StartPath) + `\?t=[A-Za-z0-9_.\-]+`).FindString(decode(dm2).Text)
	if code, page := signInWith(link2, "alice-at-gh"); code != 200 || !strings.Contains(page, "Nothing is connected until they confirm") {
		t.Fatalf("alice's sign-in: %d %s", code, page)
	}
	if code := click("alice", confirmCard("alice-at-gh"), "confirm"); code != http.StatusAccepted {
		t.Fatalf("alice's confirm: %d", code)
	}

	// The parked run resumed and called the tool as Alice's account.
	feed.await(t, "the answer", func(s string) bool { return decode(s).Channel == "general" && strings.Contains(s, "Checked on gh.") })
	reqs, err := model.ChatRequests()
	if err != nil {
		t.Fatal(err)
	}
	last, _ := json.Marshal(reqs[len(reqs)-1])
	if !strings.Contains(string(last), "alice-at-gh") {
		t.Fatalf("the tool did not run as alice's account; the model saw: %s", last)
	}

	say("alice", "dm-alice", "connections")
	feed.await(t, "alice's connections", func(s string) bool {
		return decode(s).Channel == "dm-alice" && strings.Contains(s, "I act as you on") && strings.Contains(s, "gh")
	})
	say("alice", "dm-alice", "export my data")
	feed.await(t, "the export", func(s string) bool { return decode(s).Channel == "dm-alice" && strings.Contains(s, "export") })
	var hay bytes.Buffer
	if dbURL != "" {
		hay.WriteString(dumpPostgres(t, dbURL)) // with her grant still stored
		if !strings.Contains(hay.String(), "alice") {
			t.Fatal("the dump holds nothing of alice's")
		}
	}
	say("alice", "dm-alice", "disconnect gh")
	feed.await(t, "the disconnection", func(s string) bool { return decode(s).Channel == "dm-alice" && strings.Contains(s, "Disconnected") })
	if _, rev := as.Counts(); rev <= revokedAtReject {
		t.Error("disconnect revoked nothing at the server")
	}

	// No token or code anywhere: the log, every database file or row, the
	// sandbox, the metrics.
	if resp, err := http.Get(public + "/metrics"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("metrics: %v %v", resp, err)
	} else {
		m, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !bytes.Contains(m, []byte(`marlowe_connector_calls_total{outcome="ok",server="gh"`)) {
			t.Errorf("the metrics have no call to gh: the search would prove nothing")
		}
		hay.Write(m)
	}
	hay.WriteString(logs.String())
	hay.WriteString(feed.all())
	_ = filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			b, _ := os.ReadFile(p)
			hay.Write(b)
		}
		return nil
	})
	if dbURL != "" {
		hay.WriteString(dumpPostgres(t, dbURL))
	}
	for _, l := range []string{link, link2} {
		lu, _ := url.Parse(l)
		if strings.Contains(logs.String(), lu.Query().Get("t")) {
			t.Error("a sign-in link is in the log")
		}
	}
	for _, s := range as.Secrets() {
		if bytes.Contains(hay.Bytes(), []byte(s)) {
			t.Errorf("issued secret %s… found in the logs, the sandbox or the data directory", s[:6])
		}
	}
}

// dumpPostgres is every row of every table of the database, as text (bytea
// columns in hex and as raw bytes).
func dumpPostgres(t *testing.T, dbURL string) string {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.WithoutCancel(t.Context()))
	rows, err := conn.Query(t.Context(), `SELECT quote_ident(table_name) FROM information_schema.tables WHERE table_schema = 'public'`)
	if err != nil {
		t.Fatal(err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(tables) < 5 {
		t.Fatalf("tables: %v %v", tables, err)
	}
	var out strings.Builder
	for _, tb := range tables {
		rows, err := conn.Query(t.Context(), `SELECT t::text FROM `+tb+` t`)
		if err != nil {
			t.Fatal(err)
		}
		vals, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range vals {
			out.WriteString(v)
			out.WriteByte('\n')
			// bytea renders as \x…: decode it too, so raw bytes are searched.
			for _, hx := range regexp.MustCompile(`\\x([0-9a-f]+)`).FindAllStringSubmatch(v, -1) {
				if b, err := hex.DecodeString(hx[1]); err == nil {
					out.Write(b)
				}
			}
		}
	}
	return out.String()
}
