package signin_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"github.com/zitadel/oidc/v3/example/server/exampleop"
	"github.com/zitadel/oidc/v3/example/server/storage"

	"github.com/marlowe-bot/marlowe/signin"
	"github.com/marlowe-bot/marlowe/signin/signintest"
	"github.com/marlowe-bot/marlowe/store/sqlite"
	"github.com/marlowe-bot/marlowe/vault"
)

// The same flow against an authorization server this project did not
// write: zitadel/oidc's OpenID provider (package op) with its example
// in-memory storage and login page. It has no dynamic client registration,
// so Marlowe uses a preregistered confidential client (the config's
// client id and secret); discovery is OpenID's, PKCE is S256, refresh
// tokens come with offline_access, and it has a revocation endpoint. A
// refresh token revoked at the provider makes the next refresh fail: the
// person is asked to connect again.
func TestSignInAgainstZitadel(t *testing.T) {
	ctx := t.Context()
	var asHandler http.Handler = http.NotFoundHandler()
	asSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { asHandler.ServeHTTP(w, r) }))
	t.Cleanup(asSrv.Close)
	var botHandler http.Handler = http.NotFoundHandler()
	bot := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { botHandler.ServeHTTP(w, r) }))
	t.Cleanup(bot.Close)
	redirect := bot.URL + signin.CallbackPath

	issuer := asSrv.URL
	st := storage.NewStorageWithClients(storage.NewUserStore(issuer),
		map[string]*storage.Client{"marlowe": storage.WebClient("marlowe", "zitadel-client-secret", redirect)})
	asHandler = exampleop.SetupServer(issuer, st, nil, false)

	// The protected MCP server: go-sdk's bearer middleware, checking each
	// token at the provider's userinfo endpoint.
	userinfo := func(ctx context.Context, tok string, _ *http.Request) (*auth.TokenInfo, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, issuer+"/userinfo", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		var ui struct {
			Sub   string `json:"sub"`
			Email string `json:"email"`
		}
		if resp.StatusCode != 200 || json.NewDecoder(resp.Body).Decode(&ui) != nil || ui.Sub == "" {
			return nil, fmt.Errorf("%w: userinfo %d", auth.ErrInvalidToken, resp.StatusCode)
		}
		return &auth.TokenInfo{UserID: ui.Email, Expiration: time.Now().Add(time.Minute)}, nil
	}
	mcpSrv := mcp.NewServer(&mcp.Implementation{Name: "protected", Version: "1"}, nil)
	type none struct{}
	mcp.AddTool(mcpSrv, &mcp.Tool{Name: "whoami"}, func(ctx context.Context, req *mcp.CallToolRequest, _ none) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: req.Extra.TokenInfo.UserID}}}, nil, nil
	})
	mux := http.NewServeMux()
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	endpoint := hs.URL + "/mcp"
	mux.Handle("/.well-known/oauth-protected-resource/mcp", auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
		Resource: endpoint, AuthorizationServers: []string{issuer}, ScopesSupported: []string{"openid", "email"}}))
	mux.Handle("/mcp", auth.RequireBearerToken(userinfo, &auth.RequireBearerTokenOptions{ResourceMetadataURL: hs.URL + "/.well-known/oauth-protected-resource/mcp"})(
		mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return mcpSrv }, &mcp.StreamableHTTPOptions{Stateless: true})))

	db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "m.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	kr, _ := vault.ParseKeyring(vault.NewKey(), "")
	links, _ := signin.NewLinks([]byte("zitadel-test-links-key-0123456789ab"), bot.URL)
	ev := &events{}
	logs := &syncBuf{}
	var offset time.Duration
	log := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	vlt := vault.New(db, kr, log)
	svc, err := signin.New(signin.Config{Vault: vlt, Links: links, Events: ev, Log: log, Now: func() time.Time { return time.Now().Add(offset) },
		Servers: []signin.Server{{Name: "zitadel", URL: endpoint, ClientID: "marlowe", ClientSecret: "zitadel-client-secret"}}})
	if err != nil {
		t.Fatal(err)
	}
	botHandler = svc.Handler()

	signIn := func() {
		t.Helper()
		link, _ := svc.Link("slack", "U1", "zitadel")
		b := browser("")
		u, _ := url.Parse(link)
		resp, err := b.PostForm(bot.URL+signin.StartPath, url.Values{"t": {u.Query().Get("t")}})
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		// The provider's own login page: the person signs in there.
		id := resp.Request.URL.Query().Get("authRequestID")
		if id == "" {
			t.Fatalf("not at the provider's login page: %s (%d)", resp.Request.URL, resp.StatusCode)
		}
		login := resp.Request.URL
		login.RawQuery = ""
		resp, err = b.PostForm(login.String(), url.Values{"username": {"test-user@127.0.0.1"}, "password": {"verysecure"}, "id": {id}})
		if err != nil {
			t.Fatal(err)
		}
		page, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(page), "Nothing is connected until they confirm") {
			t.Fatalf("callback: %d %s (at %s)", resp.StatusCode, page, resp.Request.URL)
		}
	}
	signIn()
	if _, err := svc.Token(ctx, "slack", "U1", "zitadel"); !errors.Is(err, signin.ErrNotConnected) {
		t.Fatalf("a pending sign-in already acts: %v", err)
	}
	if ev := ev.confirm(t, svc, "U1"); ev.Account == "" {
		t.Fatal("the confirmation card names no account")
	} else {
		t.Logf("the card names %q", ev.Account)
	}
	tok, err := svc.Token(ctx, "slack", "U1", "zitadel")
	if err != nil {
		t.Fatal(err)
	}
	if who, err := signintest.Whoami(ctx, endpoint, tok); err != nil || who != "test-user@zitadel.ch" {
		t.Fatalf("whoami = %q, %v", who, err)
	}
	// The provider's access tokens last 5 minutes: 4 minutes on, the
	// token is refreshed at the provider before it lapses.
	offset = 4 * time.Minute
	fresh, err := svc.Token(ctx, "slack", "U1", "zitadel")
	if err != nil || fresh == tok {
		t.Fatalf("refresh at zitadel: same=%v err=%v", fresh == tok, err)
	}
	if who, err := signintest.Whoami(ctx, endpoint, fresh); err != nil || who != "test-user@zitadel.ch" {
		t.Fatalf("whoami after refresh = %q, %v", who, err)
	}
	// Disconnect revokes at the provider: the token stops working there.
	if ok, err := svc.Disconnect(ctx, "slack", "U1", "zitadel", "U1"); !ok || err != nil {
		t.Fatalf("disconnect: %v %v", ok, err)
	}
	if _, err := signintest.Whoami(ctx, endpoint, fresh); err == nil {
		t.Fatal("a token revoked at zitadel still works")
	}
	if _, err := svc.Token(ctx, "slack", "U1", "zitadel"); !errors.Is(err, signin.ErrNotConnected) {
		t.Fatalf("after disconnect: %v", err)
	}
	// A refresh the provider refuses: the person signs in again, then the
	// refresh token is revoked at zitadel behind Marlowe's back (by the
	// provider's own revocation endpoint); when the access token nears
	// its end the refresh is refused and the person alone is asked to
	// connect again (refresh_failed), the dead grant dropped.
	offset = 0
	signIn()
	ev.confirm(t, svc, "U1")
	third, err := svc.Token(ctx, "slack", "U1", "zitadel")
	if err != nil {
		t.Fatal(err)
	}
	g, _, ok, err := vlt.Get(ctx, "slack", "U1", "zitadel")
	if err != nil || !ok || g.RefreshToken == "" || g.RevocationURL == "" {
		t.Fatalf("the grant: ok=%v refresh token=%v revocation=%q err=%v", ok, g.RefreshToken != "", g.RevocationURL, err)
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, g.RevocationURL,
		strings.NewReader(url.Values{"token": {g.RefreshToken}, "token_type_hint": {"refresh_token"}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth("marlowe", "zitadel-client-secret")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 200 {
		t.Fatalf("revoking the refresh token at zitadel: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	offset = 4 * time.Minute
	if _, err := svc.Token(ctx, "slack", "U1", "zitadel"); !errors.Is(err, signin.ErrReconnect) {
		t.Fatalf("a refresh zitadel refuses: %v", err)
	}
	if cs, _ := svc.List(ctx, "slack", "U1"); len(cs) != 0 {
		t.Fatalf("the dead grant stayed: %+v", cs)
	}
	want := "U1/zitadel:pending U1/zitadel:connected U1/zitadel:refreshed U1/zitadel:revoked U1/zitadel:pending U1/zitadel:connected U1/zitadel:refresh_failed"
	if got := strings.Join(ev.kinds(), " "); got != want {
		t.Fatalf("events:\n got %s\nwant %s", got, want)
	}
	for _, s := range []string{tok, fresh, third, g.RefreshToken, "zitadel-client-secret"} {
		if strings.Contains(logs.String(), s) {
			t.Errorf("a secret is in the logs")
		}
	}
}
