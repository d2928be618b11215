package signin_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/signin"
	"github.com/marlowe-bot/marlowe/signin/signintest"
	"github.com/marlowe-bot/marlowe/store/sqlite"
	"github.com/marlowe-bot/marlowe/vault"
)

// syncBuf is a log sink the test reads.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// events records connection changes as the engine would journal them.
type events struct {
	mu  sync.Mutex
	evs []core.ConnectionChanged
}

func (e *events) ConnectionChanged(_ context.Context, _ string, ev core.ConnectionChanged) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.evs = append(e.evs, ev)
	return nil
}

// pending is person's latest pending sign-in (what their DM card names).
func (e *events) pending(person string) (core.ConnectionChanged, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for i := len(e.evs) - 1; i >= 0; i-- {
		if ev := e.evs[i]; ev.Person == person && ev.Event == core.ConnPending {
			return ev, true
		}
	}
	return core.ConnectionChanged{}, false
}

// confirm presses Confirm on person's latest pending sign-in card, as
// that person (the engine passes the platform-verified clicker).
func (e *events) confirm(t *testing.T, svc *signin.Service, person string) core.ConnectionChanged {
	t.Helper()
	ev, ok := e.pending(person)
	if !ok {
		t.Fatalf("no sign-in of %s waits for confirmation", person)
	}
	if _, err := svc.Confirm(t.Context(), "slack", person, ev.Pending, true); err != nil {
		t.Fatalf("%s confirms: %v", person, err)
	}
	return ev
}

func (e *events) kinds() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for _, ev := range e.evs {
		out = append(out, ev.Person+"/"+ev.Server+":"+ev.Event)
	}
	return out
}

type rig struct {
	t      *testing.T
	as     *signintest.AS
	mcpURL string
	bot    *httptest.Server
	svc    *signin.Service
	logs   *syncBuf
	ev     *events
	dbPath string
	mu     sync.Mutex
	offset time.Duration
}

func (r *rig) now() time.Time { r.mu.Lock(); defer r.mu.Unlock(); return time.Now().Add(r.offset) }
func (r *rig) advance(d time.Duration) {
	r.mu.Lock()
	r.offset += d
	r.mu.Unlock()
}

func newRig(t *testing.T) *rig { return newRigAt(t, httptest.NewServer, "") }

// newRigAt is newRig with the bot's public URL served by start (an https
// one with httptest.NewTLSServer), under the path prefix (as a reverse
// proxy serving the bot at https://example.com/marlowe would: the prefix
// is stripped before the bot's handler).
func newRigAt(t *testing.T, start func(http.Handler) *httptest.Server, prefix string) *rig {
	r := &rig{t: t, as: signintest.NewAS(t), logs: &syncBuf{}, ev: &events{}}
	r.mcpURL = signintest.NewProtectedMCP(t, r.as)
	var h http.Handler = http.NotFoundHandler()
	r.bot = start(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) { h.ServeHTTP(w, req) }))
	t.Cleanup(r.bot.Close)
	r.dbPath = filepath.Join(t.TempDir(), "marlowe.db")
	st, err := sqlite.Open(t.Context(), r.dbPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	kr, err := vault.ParseKeyring(vault.NewKey(), "")
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewJSONHandler(r.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	links, err := signin.NewLinks(bytes.Repeat([]byte{7}, 32), r.bot.URL+prefix)
	if err != nil {
		t.Fatal(err)
	}
	r.svc, err = signin.New(signin.Config{Vault: vault.New(st, kr, log), Links: links, Events: r.ev, Now: r.now, Log: log,
		Servers: []signin.Server{{Name: "github", URL: r.mcpURL}}})
	if err != nil {
		t.Fatal(err)
	}
	h = r.svc.Handler()
	if prefix != "" {
		h = http.StripPrefix(prefix, h)
	}
	return r
}

// browser is one person's browser: its own cookies.
func browser(stopAt string) *http.Client { return browserWith(http.DefaultTransport, stopAt) }

// browserWith is browser over transport rt (the TLS bot's, to trust its
// certificate).
func browserWith(rt http.RoundTripper, stopAt string) *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Transport: rt, Jar: jar, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if stopAt != "" && strings.HasPrefix(req.URL.Path, stopAt) {
			return http.ErrUseLastResponse
		}
		return nil
	}}
}

func get(t *testing.T, c *http.Client, u string) (int, string) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// follow opens link in c, presses Continue, and returns the final status
// and page (with stopAt set, the redirect to it is not followed: its
// Location is returned instead).
func follow(t *testing.T, c *http.Client, link string) (int, string) {
	t.Helper()
	code, page := get(t, c, link)
	if code != 200 || !strings.Contains(page, "Continue to github") {
		return code, page
	}
	u, _ := url.Parse(link)
	resp, err := c.PostForm(u.Scheme+"://"+u.Host+signin.StartPath, url.Values{"t": {u.Query().Get("t")}})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if loc := resp.Header.Get("Location"); loc != "" {
		return resp.StatusCode, loc
	}
	return resp.StatusCode, string(b)
}

func (r *rig) connect(person, account string) {
	r.t.Helper()
	r.as.SetUser(account)
	link, err := r.svc.Link("slack", person, "github")
	if err != nil {
		r.t.Fatal(err)
	}
	if code, page := follow(r.t, browser(""), link); code != 200 || !strings.Contains(page, "Nothing is connected until they confirm") {
		r.t.Fatalf("sign-in of %s: %d %s", person, code, page)
	}
	if ev := r.ev.confirm(r.t, r.svc, person); !strings.Contains(ev.Account, account) {
		r.t.Fatalf("the confirmation card of %s names account %q, want %s", person, ev.Account, account)
	}
}

// noSecrets searches everything the rig produced for every token and code
// the authorization server ever issued.
func (r *rig) noSecrets(extra ...string) {
	r.t.Helper()
	db, _ := os.ReadFile(r.dbPath)
	wal, _ := os.ReadFile(r.dbPath + "-wal")
	evs, _ := json.Marshal(r.ev.evs)
	haystacks := map[string]string{"logs": r.logs.String(), "journal events": string(evs), "database": string(db) + string(wal)}
	for i, e := range extra {
		haystacks["extra"+string(rune('0'+i))] = e
	}
	for _, s := range r.as.Secrets() {
		for where, h := range haystacks {
			if strings.Contains(h, s) {
				r.t.Errorf("%s contains issued secret %s…", where, s[:6])
			}
		}
	}
}

func TestSignInEndToEnd(t *testing.T) {
	r := newRig(t)
	ctx := t.Context()
	if _, err := r.svc.Token(ctx, "slack", "U1", "github"); !errors.Is(err, signin.ErrNotConnected) {
		t.Fatalf("before sign-in: %v", err)
	}
	r.connect("U1", "alice")
	r.connect("U2", "bob")
	for person, account := range map[string]string{"U1": "alice", "U2": "bob"} {
		tok, err := r.svc.Token(ctx, "slack", person, "github")
		if err != nil {
			t.Fatal(err)
		}
		got, err := signintest.Whoami(ctx, r.mcpURL, tok)
		if err != nil || got != account {
			t.Fatalf("%s calls as %q (%v), want %s", person, got, err, account)
		}
	}
	if _, err := signintest.Whoami(ctx, r.mcpURL, "forged"); err == nil {
		t.Fatal("the protected server accepted a forged token")
	}
	cs, err := r.svc.List(ctx, "slack", "")
	if err != nil || len(cs) != 2 || cs[0].Person != "U1" || cs[1].Person != "U2" {
		t.Fatalf("connections: %+v %v", cs, err)
	}
	if got := strings.Join(r.ev.kinds(), " "); got != "U1/github:pending U1/github:connected U2/github:pending U2/github:connected" {
		t.Fatalf("events: %s", got)
	}
	r.noSecrets()
}

func TestSignInLinkRefusals(t *testing.T) {
	r := newRig(t)
	r.as.SetUser("alice")
	link, _ := r.svc.Link("slack", "U1", "github")

	// A link unfurler or preview fetcher only GETs: the link stays usable.
	if code, _ := get(t, http.DefaultClient, link); code != 200 {
		t.Fatalf("landing: %d", code)
	}
	// Tampered: the same link made out to someone else.
	u, _ := url.Parse(link)
	tok := u.Query().Get("t")
	body, sig, _ := strings.Cut(tok, ".")
	raw, _ := base64Decode(body)
	forged := strings.Replace(string(raw), `"u":"U1"`, `"u":"U2"`, 1)
	tampered := r.bot.URL + signin.StartPath + "?t=" + base64Encode(forged) + "." + sig
	if code, page := follow(t, browser(""), tampered); code != 400 || !strings.Contains(page, "not valid") {
		t.Fatalf("tampered link: %d %s", code, page)
	}
	// Alice's sign-in in her browser, stopped at the redirect back.
	alice := browser(signin.CallbackPath)
	code, callback := follow(t, alice, link)
	if code != http.StatusFound || !strings.Contains(callback, signin.CallbackPath) {
		t.Fatalf("alice: %d %s", code, callback)
	}
	// Another person follows her link: used.
	if code, page := follow(t, browser(""), link); code != 400 || !strings.Contains(page, "already used") {
		t.Fatalf("another person on a used link: %d %s", code, page)
	}
	// Someone who intercepted the redirect back (code and state) replays
	// it from their browser: refused, and it does not connect anyone.
	if code, page := get(t, browser(""), callback); code != 400 || !strings.Contains(page, "another browser") {
		t.Fatalf("callback from another browser: %d %s", code, page)
	}
	// A wrong state.
	cb, _ := url.Parse(callback)
	q := cb.Query()
	q.Set("state", "not-the-state")
	cb.RawQuery = q.Encode()
	if code, page := get(t, alice, cb.String()); code != 400 || !strings.Contains(page, "unknown") {
		t.Fatalf("wrong state: %d %s", code, page)
	}
	if cs, _ := r.svc.List(t.Context(), "slack", ""); len(cs) != 0 {
		t.Fatalf("refused sign-ins connected %+v", cs)
	}
	// A replayed callback after the real one cannot run again.
	if code, _ := get(t, alice, callback); code != 400 {
		t.Fatalf("replayed callback: %d", code)
	}
	// An expired link.
	old, _ := r.svc.Link("slack", "U1", "github")
	r.advance(signin.LinkTTL + time.Second)
	if code, page := follow(t, browser(""), old); code != 400 || !strings.Contains(page, "expired") {
		t.Fatalf("expired link: %d %s", code, page)
	}
	r.noSecrets()
}

func TestSignInRefreshRevocationAndFailure(t *testing.T) {
	r := newRig(t)
	ctx := t.Context()
	r.connect("U1", "alice")
	first, err := r.svc.Token(ctx, "slack", "U1", "github")
	if err != nil {
		t.Fatal(err)
	}
	// Shortly before expiry the token is refreshed, not used to the end.
	r.advance(time.Hour - time.Minute)
	second, err := r.svc.Token(ctx, "slack", "U1", "github")
	if err != nil || second == first || refreshes(r.as) != 1 {
		t.Fatalf("refresh: same=%v refreshes=%d err=%v", second == first, refreshes(r.as), err)
	}
	if got, err := signintest.Whoami(ctx, r.mcpURL, second); err != nil || got != "alice" {
		t.Fatalf("refreshed token: %q %v", got, err)
	}
	// Disconnect revokes at the server: the token stops working there.
	if ok, err := r.svc.Disconnect(ctx, "slack", "U1", "github", "U1"); !ok || err != nil {
		t.Fatalf("disconnect: %v %v", ok, err)
	}
	if _, rev := r.as.Counts(); rev == 0 {
		t.Fatal("nothing was revoked at the server")
	}
	if _, err := signintest.Whoami(ctx, r.mcpURL, second); err == nil {
		t.Fatal("a revoked token still works")
	}
	if _, err := r.svc.Token(ctx, "slack", "U1", "github"); !errors.Is(err, signin.ErrNotConnected) {
		t.Fatalf("after disconnect: %v", err)
	}
	// A refresh the server refuses: the person is asked to reconnect
	// (refresh_failed), the dead grant is dropped.
	r.connect("U1", "alice")
	r.as.FailRefresh(true)
	r.advance(2 * time.Hour)
	if _, err := r.svc.Token(ctx, "slack", "U1", "github"); !errors.Is(err, signin.ErrReconnect) {
		t.Fatalf("failed refresh: %v", err)
	}
	want := "U1/github:pending U1/github:connected U1/github:refreshed U1/github:revoked U1/github:pending U1/github:connected U1/github:refresh_failed"
	if got := strings.Join(r.ev.kinds(), " "); got != want {
		t.Fatalf("events:\n got %s\nwant %s", got, want)
	}
	// `forget me`: every connection of the person goes.
	r.as.FailRefresh(false)
	r.connect("U1", "alice")
	r.connect("U2", "bob")
	if n, err := r.svc.DisconnectAll(ctx, "slack", "U1", "U1"); n != 1 || err != nil {
		t.Fatalf("disconnect all: %d %v", n, err)
	}
	if cs, _ := r.svc.List(ctx, "slack", ""); len(cs) != 1 || cs[0].Person != "U2" {
		t.Fatalf("left: %+v", cs)
	}
	r.noSecrets()
}

func refreshes(as *signintest.AS) int {
	n, _ := as.Counts()
	return n
}

// A grant sealed under a key the process no longer has (the old key was
// dropped too early): treated as lapsed, dropped, and the person asked to
// connect again; the error never holds the token.
func TestUnreadableGrantAsksToReconnect(t *testing.T) {
	ctx := t.Context()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "m.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	old, _ := vault.ParseKeyring(vault.NewKey(), "")
	cur, _ := vault.ParseKeyring(vault.NewKey(), "")
	c := core.Connection{Platform: "slack", Person: "U1", Server: "github", ConnectedAt: time.Now()}
	if err := vault.New(st, old, nil).Put(ctx, c, vault.Grant{AccessToken: "AT-unreadable-1"}); err != nil {
		t.Fatal(err)
	}
	links, _ := signin.NewLinks(bytes.Repeat([]byte{1}, 32), "https://m.example")
	ev := &events{}
	svc, _ := signin.New(signin.Config{Vault: vault.New(st, cur, nil), Links: links, Events: ev, Servers: []signin.Server{{Name: "github", URL: "https://x/mcp"}}})
	_, err = svc.Token(ctx, "slack", "U1", "github")
	if !errors.Is(err, signin.ErrReconnect) || !errors.Is(err, core.ErrNotSignedIn) || strings.Contains(err.Error(), "AT-unreadable") {
		t.Fatalf("token: %v", err)
	}
	if cs, _ := svc.List(ctx, "slack", "U1"); len(cs) != 0 {
		t.Fatalf("the unreadable grant stayed: %+v", cs)
	}
	if got := strings.Join(ev.kinds(), " "); got != "U1/github:refresh_failed" {
		t.Fatalf("events: %s", got)
	}
}

// Ten calls at once when the token is about to lapse: one refresh at the
// server (its refresh tokens rotate), every call gets the fresh token, the
// grant survives.
func TestConcurrentCallsRefreshOnce(t *testing.T) {
	r := newRig(t)
	ctx := t.Context()
	r.connect("U1", "alice")
	r.advance(time.Hour - time.Minute)
	r.as.SetExpiresIn(3 * 3600) // the refreshed token outlives the test clock's hour
	var wg sync.WaitGroup
	toks := make(chan string, 10)
	for range 10 {
		wg.Go(func() {
			tok, err := r.svc.Token(ctx, "slack", "U1", "github")
			if err != nil {
				t.Error(err)
			}
			toks <- tok
		})
	}
	wg.Wait()
	close(toks)
	first := ""
	for tok := range toks {
		if first == "" {
			first = tok
		}
		if tok != first {
			t.Fatal("calls got different tokens")
		}
	}
	if n := refreshes(r.as); n != 1 {
		t.Fatalf("%d refreshes at the server, want 1", n)
	}
	if cs, _ := r.svc.List(ctx, "slack", "U1"); len(cs) != 1 {
		t.Fatal("the grant was dropped")
	}
}

// A token the server refuses before it lapses (revoked on the server's
// side): told of the 401, the service refreshes the grant at once, and
// when the refresh fails too it drops the grant and asks the person to
// connect again. On the old code a refused token stayed stored, listed as
// connected and sent again on every call, until the person reconnected.
// A stale report (the token was already replaced) changes nothing.
func TestRejectedTokenIsRefreshedOrDropped(t *testing.T) {
	r := newRig(t)
	ctx := t.Context()
	r.connect("U1", "alice")
	tok, err := r.svc.Token(ctx, "slack", "U1", "github")
	if err != nil {
		t.Fatal(err)
	}
	r.as.DropAccessTokens()
	if _, err := signintest.Whoami(ctx, r.mcpURL, tok); err == nil {
		t.Fatal("the server still takes the dropped token")
	}
	if err := r.svc.Rejected(ctx, "slack", "U1", "github", tok); err != nil {
		t.Fatalf("rejected, refreshable: %v", err)
	}
	fresh, err := r.svc.Token(ctx, "slack", "U1", "github")
	if err != nil || fresh == tok {
		t.Fatalf("after the rejection: same=%v err=%v", fresh == tok, err)
	}
	if got, err := signintest.Whoami(ctx, r.mcpURL, fresh); err != nil || got != "alice" {
		t.Fatalf("refreshed token: %q %v", got, err)
	}
	// The old token reported again (a slow call): nothing more happens.
	if err := r.svc.Rejected(ctx, "slack", "U1", "github", tok); err != nil || refreshes(r.as) != 1 {
		t.Fatalf("stale report: refreshes=%d err=%v", refreshes(r.as), err)
	}
	// Refused, and the refresh refused too: dropped, asked to reconnect.
	r.as.DropAccessTokens()
	r.as.FailRefresh(true)
	if err := r.svc.Rejected(ctx, "slack", "U1", "github", fresh); !errors.Is(err, signin.ErrReconnect) {
		t.Fatalf("rejected, refresh refused: %v", err)
	}
	if cs, _ := r.svc.List(ctx, "slack", "U1"); len(cs) != 0 {
		t.Fatalf("the dead grant stayed: %+v", cs)
	}
	want := "U1/github:pending U1/github:connected U1/github:refreshed U1/github:refresh_failed"
	if got := strings.Join(r.ev.kinds(), " "); got != want {
		t.Fatalf("events:\n got %s\nwant %s", got, want)
	}
	r.noSecrets()
}
