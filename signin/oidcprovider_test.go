package signin_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"html"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/marlowe-bot/marlowe/internal/mcpservers"
	"github.com/marlowe-bot/marlowe/signin"
	"github.com/marlowe-bot/marlowe/signin/signintest"
	"github.com/marlowe-bot/marlowe/store/sqlite"
	"github.com/marlowe-bot/marlowe/vault"
)

// oidcProvider is panva's oidc-provider (npm, pinned by scripts/npm) run
// by testdata/oidc-provider.mjs for the protected resource resource.
type oidcProvider struct {
	issuer   string
	rsSecret string // the resource server's client secret, for introspection
}

func startOIDCProvider(t *testing.T, resource string, accessTTL time.Duration, env ...string) *oidcProvider {
	t.Helper()
	mod := mcpservers.Module(t, "oidc-provider")
	p := &oidcProvider{rsSecret: rand.Text()}
	cmd := exec.Command("node", filepath.Join("testdata", "oidc-provider.mjs"))
	cmd.Env = append(os.Environ(), "OIDC_PROVIDER_DIR="+mod, "RESOURCE="+resource, "RS_CLIENT_SECRET="+p.rsSecret,
		fmt.Sprintf("ACCESS_TOKEN_TTL=%d", int(accessTTL.Seconds())))
	cmd.Env = append(cmd.Env, env...)
	stderr := &syncBuf{}
	cmd.Stderr = stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close() // it exits when its stdin ends
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("oidc-provider's stderr:\n%s", stderr.String())
		}
	})
	ready := make(chan error, 1)
	go func() {
		line, err := bufio.NewReader(stdout).ReadString('\n')
		if err == nil {
			var hello struct{ Issuer string }
			err = json.Unmarshal([]byte(line), &hello)
			p.issuer = hello.Issuer
		}
		ready <- err
	}()
	select {
	case err := <-ready:
		if err != nil || p.issuer == "" {
			t.Fatalf("oidc-provider did not start: %v\n%s", err, stderr.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("oidc-provider did not start within a minute:\n%s", stderr.String())
	}
	return p
}

// introspection is oidc-provider's answer about a token (RFC 7662).
type introspection struct {
	Active   bool            `json:"active"`
	Sub      string          `json:"sub"`
	ClientID string          `json:"client_id"`
	Scope    string          `json:"scope"`
	Exp      int64           `json:"exp"`
	Aud      json.RawMessage `json:"aud"`
}

func (in introspection) audience() []string {
	var one string
	if json.Unmarshal(in.Aud, &one) == nil {
		return []string{one}
	}
	var many []string
	_ = json.Unmarshal(in.Aud, &many)
	return many
}

// introspect asks oidc-provider about tok as the resource server.
func (p *oidcProvider) introspect(ctx context.Context, tok string) (introspection, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, p.issuer+"/token/introspection",
		strings.NewReader(url.Values{"token": {tok}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth("mcp-resource", p.rsSecret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return introspection{}, err
	}
	defer resp.Body.Close()
	var in introspection
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return in, fmt.Errorf("introspection: %d %s", resp.StatusCode, b)
	}
	return in, json.NewDecoder(resp.Body).Decode(&in)
}

// formAction matches the provider's login and consent forms.
var formAction = regexp.MustCompile(`<form[^>]*action="([^"]*)"[^>]*method="post"`)
var hiddenInput = regexp.MustCompile(`<input type="hidden" name="([^"]*)" value="([^"]*)"`)

// The sign-in flow against an authorization server nobody here wrote which
// offers dynamic client registration and client ID metadata documents:
// panva's oidc-provider, started by testdata/oidc-provider.mjs. The
// protected MCP server is go-sdk's bearer middleware checking each token
// by introspection at the provider (active, bound to this resource, scope
// mcp:tools) and publishing RFC 9728 metadata naming the provider and the
// scopes openid and mcp:tools. Marlowe discovers it (RFC 9728 → RFC
// 8414/OpenID) and settles a public client with the exact redirect URI:
// under an http public URL it registers (RFC 7591); under an https one its
// client id is its document's URL, which the provider fetches. It sends
// the person there with PKCE S256 and the resource (RFC 8707); the person
// signs in and consents on the provider's own forms; after the person
// confirms, a tool call carries their token and answers as their account;
// the token is refreshed at the provider (the refresh token rotated, the
// new access token still bound to the resource); disconnect revokes there
// (introspection says inactive and the server refuses the token); a
// refresh token revoked at the provider behind Marlowe's back makes the
// next refresh fail and the person is asked to connect again. No issued
// token is in the logs, events or database.
//
// It failed on the code before, three ways (the document's case the latter
// two): the registration was refused (Marlowe named the resource's scope
// mcp:tools, which is not among the provider's own scopes: now it
// registers again without a scope); no refresh token came (offline_access
// without prompt=consent is dropped: now prompt=consent goes with it); and
// the refreshed token was the provider's userinfo token, refused by the
// MCP server (the refresh did not name the resource: now it does).
func TestSignInAgainstOIDCProvider(t *testing.T) {
	for _, tc := range []struct {
		name  string
		start func(http.Handler) *httptest.Server
	}{
		// An http public URL offers no client ID metadata document: Marlowe
		// registers (RFC 7591).
		{"dynamic client registration", httptest.NewServer},
		// An https one does, and the provider offers them: Marlowe's client
		// id is its document's URL, which the provider fetches.
		{"client ID metadata document", httptest.NewTLSServer},
	} {
		t.Run(tc.name, func(t *testing.T) { signInAtOIDCProvider(t, tc.start) })
	}
}

func signInAtOIDCProvider(t *testing.T, start func(http.Handler) *httptest.Server) {
	ctx := t.Context()
	mux := http.NewServeMux()
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	endpoint := hs.URL + "/mcp"
	var botHandler http.Handler = http.NotFoundHandler()
	var docFetches atomic.Int32 // the provider's GETs of Marlowe's client metadata document
	bot := start(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == signin.ClientMetadataPath {
			docFetches.Add(1)
		}
		botHandler.ServeHTTP(w, r)
	}))
	t.Cleanup(bot.Close)
	var env []string
	if bot.TLS != nil {
		// The provider fetches Marlowe's document from the bot: it trusts
		// the bot's test certificate.
		ca := filepath.Join(t.TempDir(), "bot.pem")
		if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: bot.Certificate().Raw}), 0o600); err != nil {
			t.Fatal(err)
		}
		env = append(env, "NODE_EXTRA_CA_CERTS="+ca)
	}
	op := startOIDCProvider(t, endpoint, 10*time.Minute, env...)

	verify := func(ctx context.Context, tok string, _ *http.Request) (*auth.TokenInfo, error) {
		in, err := op.introspect(ctx, tok)
		if err != nil {
			return nil, err
		}
		if !in.Active || !slices.Contains(in.audience(), endpoint) {
			return nil, fmt.Errorf("%w: active=%v aud=%s", auth.ErrInvalidToken, in.Active, in.Aud)
		}
		return &auth.TokenInfo{UserID: in.Sub, Scopes: strings.Fields(in.Scope), Expiration: time.Unix(in.Exp, 0)}, nil
	}
	mcpSrv := mcp.NewServer(&mcp.Implementation{Name: "protected", Version: "1"}, nil)
	type none struct{}
	mcp.AddTool(mcpSrv, &mcp.Tool{Name: "whoami"}, func(ctx context.Context, req *mcp.CallToolRequest, _ none) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: req.Extra.TokenInfo.UserID}}}, nil, nil
	})
	prmURL := hs.URL + "/.well-known/oauth-protected-resource/mcp"
	mux.Handle("/.well-known/oauth-protected-resource/mcp", auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
		Resource: endpoint, AuthorizationServers: []string{op.issuer}, ScopesSupported: []string{"openid", "mcp:tools"}}))
	mux.Handle("/mcp", auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{ResourceMetadataURL: prmURL, Scopes: []string{"mcp:tools"}})(
		mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return mcpSrv }, &mcp.StreamableHTTPOptions{Stateless: true})))

	dbPath := filepath.Join(t.TempDir(), "m.db")
	db, err := sqlite.Open(ctx, dbPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	kr, _ := vault.ParseKeyring(vault.NewKey(), "")
	links, _ := signin.NewLinks([]byte("oidc-provider-test-links-key-0123456"), bot.URL)
	ev := &events{}
	logs := &syncBuf{}
	var offset time.Duration
	log := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	vlt := vault.New(db, kr, log)
	svc, err := signin.New(signin.Config{Vault: vlt, Links: links, Events: ev, Log: log, Now: func() time.Time { return time.Now().Add(offset) },
		Servers: []signin.Server{{Name: "idp", URL: endpoint}}}) // no client id
	if err != nil {
		t.Fatal(err)
	}
	botHandler = svc.Handler()

	// The person follows the link, presses Continue, and signs in and
	// consents on the provider's own HTML forms, in a fresh browser.
	signIn := func() {
		t.Helper()
		link, _ := svc.Link("slack", "U1", "idp")
		b := browserWith(bot.Client().Transport, "")
		u, _ := url.Parse(link)
		resp, err := b.PostForm(bot.URL+signin.StartPath, url.Values{"t": {u.Query().Get("t")}})
		if err != nil {
			t.Fatal(err)
		}
		var forms []string
		for done := false; !done; {
			page, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			m := formAction.FindSubmatch(page)
			if m == nil || !strings.HasPrefix(resp.Request.URL.String(), op.issuer) || len(forms) == 4 {
				if resp.StatusCode != 200 || !strings.Contains(string(page), "Nothing is connected until they confirm") {
					t.Fatalf("sign-in ended at %s (%d) after forms %q: %s", resp.Request.URL, resp.StatusCode, forms, page)
				}
				done = true
				continue
			}
			form := url.Values{}
			for _, h := range hiddenInput.FindAllSubmatch(page, -1) {
				form.Set(string(h[1]), html.UnescapeString(string(h[2])))
			}
			forms = append(forms, form.Get("prompt"))
			if form.Get("prompt") == "login" {
				form.Set("login", "alice")
				form.Set("password", "any")
			}
			action, err := resp.Request.URL.Parse(html.UnescapeString(string(m[1])))
			if err != nil {
				t.Fatal(err)
			}
			if resp, err = b.PostForm(action.String(), form); err != nil {
				t.Fatal(err)
			}
		}
		if got := strings.Join(forms, " "); got != "login consent" {
			t.Fatalf("the provider's forms: %q, want login then consent", got)
		}
	}
	signIn()
	if _, err := svc.Token(ctx, "slack", "U1", "idp"); !errors.Is(err, signin.ErrNotConnected) {
		t.Fatalf("a pending sign-in already acts: %v", err)
	}
	// The scopes include openid: the provider's ID token names the
	// account on the person's confirmation card.
	if card := ev.confirm(t, svc, "U1"); card.Account != "alice" {
		t.Fatalf("the confirmation card names %q, want alice", card.Account)
	}

	// A public client, registered dynamically or named by its document's
	// URL; the token is bound to the MCP resource and a call with it
	// answers as alice.
	g, _, ok, err := vlt.Get(ctx, "slack", "U1", "idp")
	if err != nil || !ok {
		t.Fatalf("no grant: %v", err)
	}
	if g.ClientID == "" || g.ClientSecret != "" || g.Resource != endpoint {
		t.Fatalf("the grant: client %q (secret %v), resource %q", g.ClientID, g.ClientSecret != "", g.Resource)
	}
	if doc := bot.URL + signin.ClientMetadataPath; (bot.TLS != nil) != (g.ClientID == doc) || (bot.TLS != nil) != (docFetches.Load() > 0) {
		t.Fatalf("client id %q (the document is %s, fetched %d times)", g.ClientID, doc, docFetches.Load())
	}
	if g.RefreshToken == "" {
		t.Fatal("oidc-provider issued no refresh token")
	}
	tok, err := svc.Token(ctx, "slack", "U1", "idp")
	if err != nil {
		t.Fatal(err)
	}
	in, err := op.introspect(ctx, tok)
	if err != nil || !in.Active || in.ClientID != g.ClientID || in.Sub != "alice" || !slices.Contains(in.audience(), endpoint) {
		t.Fatalf("the access token at the provider: %+v %v", in, err)
	}
	if who, err := signintest.Whoami(ctx, endpoint, tok); err != nil || who != "alice" {
		t.Fatalf("whoami = %q, %v", who, err)
	}
	if _, err := signintest.Whoami(ctx, endpoint, "forged"); err == nil {
		t.Fatal("the protected server accepted a forged token")
	}

	// 9 minutes on (by Marlowe's clock), the 10-minute token is refreshed
	// at the provider: a new access token, still bound to the resource,
	// and the refresh token rotated (the old one no longer active).
	offset = 9 * time.Minute
	fresh, err := svc.Token(ctx, "slack", "U1", "idp")
	if err != nil || fresh == tok {
		t.Fatalf("refresh at oidc-provider: same=%v err=%v", fresh == tok, err)
	}
	if who, err := signintest.Whoami(ctx, endpoint, fresh); err != nil || who != "alice" {
		t.Fatalf("whoami after refresh = %q, %v", who, err)
	}
	g2, _, _, err := vlt.Get(ctx, "slack", "U1", "idp")
	if err != nil || g2.RefreshToken == "" || g2.RefreshToken == g.RefreshToken {
		t.Fatalf("the refresh token was not rotated: %v", err)
	}
	if in, err := op.introspect(ctx, g.RefreshToken); err != nil || in.Active {
		t.Fatalf("the rotated-out refresh token: %+v %v", in, err)
	}

	// Disconnect revokes at the provider: the token stops working there.
	if ok, err := svc.Disconnect(ctx, "slack", "U1", "idp", "U1"); !ok || err != nil {
		t.Fatalf("disconnect: %v %v", ok, err)
	}
	for name, s := range map[string]string{"access token": fresh, "refresh token": g2.RefreshToken} {
		if in, err := op.introspect(ctx, s); err != nil || in.Active {
			t.Fatalf("the %s after disconnect: %+v %v", name, in, err)
		}
	}
	if _, err := signintest.Whoami(ctx, endpoint, fresh); err == nil {
		t.Fatal("a token revoked at oidc-provider still works")
	}
	if _, err := svc.Token(ctx, "slack", "U1", "idp"); !errors.Is(err, signin.ErrNotConnected) {
		t.Fatalf("after disconnect: %v", err)
	}

	// A refresh the provider refuses: alice signs in again, and her
	// refresh token is revoked at the provider behind Marlowe's back (at
	// its revocation endpoint, as her client); when the access token nears
	// its end the refresh is refused and she alone is asked to connect
	// again (refresh_failed), the dead grant dropped.
	offset = 0
	signIn()
	ev.confirm(t, svc, "U1")
	third, err := svc.Token(ctx, "slack", "U1", "idp")
	if err != nil {
		t.Fatal(err)
	}
	g3, _, ok, err := vlt.Get(ctx, "slack", "U1", "idp")
	if err != nil || !ok || g3.RefreshToken == "" || g3.RevocationURL == "" {
		t.Fatalf("the second grant: ok=%v refresh token=%v revocation=%q err=%v", ok, g3.RefreshToken != "", g3.RevocationURL, err)
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, g3.RevocationURL, strings.NewReader(url.Values{
		"token": {g3.RefreshToken}, "token_type_hint": {"refresh_token"}, "client_id": {g3.ClientID}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 200 {
		t.Fatalf("revoking the refresh token at oidc-provider: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	if in, err := op.introspect(ctx, g3.RefreshToken); err != nil || in.Active {
		t.Fatalf("the revoked refresh token: %+v %v", in, err)
	}
	offset = 9 * time.Minute
	if _, err := svc.Token(ctx, "slack", "U1", "idp"); !errors.Is(err, signin.ErrReconnect) {
		t.Fatalf("a refresh oidc-provider refuses: %v", err)
	}
	if cs, _ := svc.List(ctx, "slack", "U1"); len(cs) != 0 {
		t.Fatalf("the dead grant stayed: %+v", cs)
	}

	want := "U1/idp:pending U1/idp:connected U1/idp:refreshed U1/idp:revoked U1/idp:pending U1/idp:connected U1/idp:refresh_failed"
	if got := strings.Join(ev.kinds(), " "); got != want {
		t.Fatalf("events:\n got %s\nwant %s", got, want)
	}
	dbFile, _ := os.ReadFile(dbPath)
	wal, _ := os.ReadFile(dbPath + "-wal")
	evs, _ := json.Marshal(ev.evs)
	for where, h := range map[string]string{"logs": logs.String(), "events": string(evs), "database": string(dbFile) + string(wal)} {
		for name, s := range map[string]string{"access token": tok, "refreshed access token": fresh,
			"refresh token": g.RefreshToken, "rotated refresh token": g2.RefreshToken,
			"second access token": third, "second refresh token": g3.RefreshToken} {
			if strings.Contains(h, s) {
				t.Errorf("the %s is in the %s", name, where)
			}
		}
	}
}
