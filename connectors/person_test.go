package connectors

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/marlowe-bot/marlowe/core"
)

// A protected go-sdk MCP server whose whoami tool answers with the account
// the bearer token belongs to; every token it saw is recorded.
func protectedServer(t *testing.T, accounts map[string]string) (string, func() []string) {
	var mu sync.Mutex
	var seen []string
	verify := func(_ context.Context, tok string, _ *http.Request) (*auth.TokenInfo, error) {
		mu.Lock()
		seen = append(seen, tok)
		mu.Unlock()
		who, ok := accounts[tok]
		if !ok {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: who, Expiration: time.Now().Add(time.Hour)}, nil
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "p", Version: "1"}, nil)
	type none struct{}
	mcp.AddTool(srv, &mcp.Tool{Name: "whoami", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, req *mcp.CallToolRequest, _ none) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "you are " + req.Extra.TokenInfo.UserID}}}, nil, nil
		})
	mux := http.NewServeMux()
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	mux.Handle("/.well-known/oauth-protected-resource/mcp", auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{Resource: hs.URL + "/mcp", AuthorizationServers: []string{"http://127.0.0.1:1"}}))
	mux.Handle("/mcp", auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{ResourceMetadataURL: hs.URL + "/.well-known/oauth-protected-resource/mcp"})(
		mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true})))
	return hs.URL + "/mcp", func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), seen...) }
}

// A person server: before anyone signed in only sign_in is offered; a
// person not signed in gets a sign-in request and nothing reaches the
// server; a signed-in person lists the tools; each call carries the
// requester's own token, never another person's, and no session is
// shared; the configured (bot) header is sent beside it, never instead.
func TestPersonServerCallsCarryTheRequestersToken(t *testing.T) {
	url, seen := protectedServer(t, map[string]string{"tok-alice": "alice", "tok-bob": "bob"})
	tokens := map[string]string{"UALICE": "tok-alice", "UBOB": "tok-bob"}
	var mu sync.Mutex
	m := New(&Config{File: "t.json", FindToolAfter: DefaultFindToolAfter, Servers: []Server{{Name: "gh", Type: HTTP, URL: url, Identity: IdentityPerson, Timeout: 10 * time.Second}}},
		Options{Tokens: func(_ context.Context, platform, person, server string) (string, error) {
			mu.Lock()
			defer mu.Unlock()
			if tok, ok := tokens[person]; ok && platform == "slack" && server == "gh" {
				return tok, nil
			}
			return "", fmt.Errorf("no grant: %w", core.ErrNotSignedIn)
		}})
	m.Start(t.Context())
	t.Cleanup(func() { m.Close() })
	if err := m.WaitReady(t.Context()); err != nil {
		t.Fatal(err)
	}
	ch := core.ChannelKey("slack/T/C1")
	if ts := m.ToolsIn(ch); len(ts) != 1 || ts[0].Name != "gh__sign_in" || !ts[0].ActsAsRequester {
		t.Fatalf("before any sign-in: %+v", ts)
	}
	as := func(person string) core.ToolContext {
		return core.ToolContext{Scope: core.Scope{Platform: "slack", Workspace: "T", Channel: "C1"}, Actor: core.Person{ID: person}}
	}
	ctx := t.Context()
	signIn, _ := m.Tool("gh__sign_in")
	// Carol has no sign-in: she is asked, and nothing reaches the server.
	obs, err := signIn.Run(ctx, as("UCAROL"), []byte(`{}`))
	if err != nil || obs.SignIn != "gh" || len(seen()) != 0 {
		t.Fatalf("carol: %+v %v, server saw %d tokens", obs, err, len(seen()))
	}
	// Alice signs in: the tools are listed with her token.
	if obs, err = signIn.Run(ctx, as("UALICE"), []byte(`{}`)); err != nil || !strings.Contains(obs.Text, "gh__whoami") {
		t.Fatalf("alice's sign_in: %+v %v", obs, err)
	}
	who, ok := m.Tool("gh__whoami")
	if !ok || !who.ActsAsRequester || who.Consequence != core.Read {
		t.Fatalf("whoami: %+v", who)
	}
	for _, c := range []struct{ person, want string }{{"UALICE", "you are alice"}, {"UBOB", "you are bob"}, {"UALICE", "you are alice"}} {
		obs, err := who.Run(ctx, as(c.person), []byte(`{}`))
		if err != nil || !strings.Contains(obs.Text, c.want) {
			t.Fatalf("%s: %+v %v", c.person, obs, err)
		}
	}
	// Carol again: asked to sign in, the server never sees a token for her.
	before := len(seen())
	if obs, err := who.Run(ctx, as("UCAROL"), []byte(`{}`)); err != nil || obs.SignIn != "gh" || len(seen()) != before {
		t.Fatalf("carol's call: %+v %v", obs, err)
	}
	// A token the server refuses (revoked there): a sign-in request, not an error.
	mu.Lock()
	tokens["UBOB"] = "tok-revoked"
	mu.Unlock()
	if obs, err := who.Run(ctx, as("UBOB"), []byte(`{}`)); err != nil || obs.SignIn != "gh" {
		t.Fatalf("refused token: %+v %v", obs, err)
	}
	for _, tok := range seen() {
		if tok != "tok-alice" && tok != "tok-bob" && tok != "tok-revoked" {
			t.Errorf("the server saw %q", tok)
		}
	}
}

// "identity" is parsed and checked like every other field.
func TestParseConfigIdentity(t *testing.T) {
	get := func(k string) string { return map[string]string{"GH_SECRET": "s3"}[k] }
	for _, tc := range []struct{ json, want string }{
		{`{"mcpServers":{"gh":{"url":"https://x/mcp","identity":"person","oauth":{"clientId":"c1","clientSecret":"${GH_SECRET}"}}}}`, ""},
		{`{"mcpServers":{"gh":{"url":"https://x/mcp"}}}`, ""},
		{`{"mcpServers":{"gh":{"command":"x","identity":"person"}}}`, `t.json: server gh: identity: "person" needs a remote server`},
		{`{"mcpServers":{"gh":{"url":"https://x/mcp","identity":"everyone"}}}`, `t.json: server gh: identity: unknown identity "everyone"`},
		{`{"mcpServers":{"gh":{"url":"https://x/mcp","oauth":{"clientId":"c"}}}}`, `t.json: server gh: oauth: "oauth" is for "identity": "person" servers`},
		{`{"mcpServers":{"gh":{"url":"https://x/mcp","identity":"person","oauth":{"clientId":"c","clientSecret":"${NOPE}"}}}}`, `t.json: server gh: oauth.clientSecret`},
	} {
		cfg, err := Parse("t.json", []byte(tc.json), get)
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.json, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.json, err, tc.want)
		}
		_ = cfg
	}
	cfg, _ := Parse("t.json", []byte(`{"mcpServers":{"gh":{"url":"https://x/mcp","identity":"person","oauth":{"clientId":"c1","clientSecret":"${GH_SECRET}"}},"b":{"url":"https://y/mcp"}}}`), get)
	if len(cfg.Servers) != 2 || cfg.Servers[1].Identity != IdentityPerson || cfg.Servers[1].OAuthClientSecret != "s3" || cfg.Servers[0].Identity != IdentityBot {
		t.Fatalf("parsed: %+v", cfg.Servers)
	}
}
