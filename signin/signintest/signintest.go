// Package signintest is a local OAuth 2.1 authorization server and an MCP
// server protected by it, for tests of per-person sign-in (package signin,
// cmd/bot). Never imported by the bot itself.
package signintest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// AS is a local OAuth 2.1 authorization server for the tests: RFC 8414
// metadata, dynamic client registration (RFC 7591), authorization code with
// PKCE S256 only, RFC 9207 iss, refresh-token rotation and revocation
// (RFC 7009), and on request client ID metadata documents. Its wire types
// are go-sdk's oauthex ones. It is small and written here, to make the
// server misbehave on cue (refused refreshes, short lifetimes); the same
// flow runs against a maintained provider, zitadel/oidc, in package
// signin's TestSignInAgainstZitadel. The person "logged in" at it is user.
type AS struct {
	srv *httptest.Server
	mu  sync.Mutex
	// user is who approves at /authorize (the account at the server).
	user        string
	clients     map[string][]string // client id → redirect URIs
	codes       map[string]codeGrant
	access      map[string]tokenGrant
	refresh     map[string]tokenGrant
	issued      []string // every token and code handed out, to search for
	refreshes   int
	revocations int
	failRefresh bool
	expiresIn   int
	// cimd, when set, is the client the server fetches client ID
	// metadata documents with; it then offers them instead of dynamic
	// registration.
	cimd        *http.Client
	cimdFetches []string
}

type codeGrant struct {
	client, redirect, challenge, user, resource string
}

type tokenGrant struct {
	client, user string
	exp          time.Time
}

func NewAS(t *testing.T) *AS {
	as := &AS{clients: map[string][]string{}, codes: map[string]codeGrant{}, access: map[string]tokenGrant{},
		refresh: map[string]tokenGrant{}, expiresIn: 3600}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/oauth-authorization-server", func(w http.ResponseWriter, r *http.Request) {
		u := as.srv.URL
		m := &oauthex.AuthServerMeta{Issuer: u, AuthorizationEndpoint: u + "/authorize", TokenEndpoint: u + "/token",
			RegistrationEndpoint: u + "/register", RevocationEndpoint: u + "/revoke", ScopesSupported: []string{"read", "offline_access"},
			ResponseTypesSupported: []string{"code"}, GrantTypesSupported: []string{"authorization_code", "refresh_token"},
			CodeChallengeMethodsSupported: []string{"S256"}, TokenEndpointAuthMethodsSupported: []string{"none"},
			AuthorizationResponseIssParameterSupported: true}
		as.mu.Lock()
		if as.cimd != nil {
			m.ClientIDMetadataDocumentSupported, m.RegistrationEndpoint = true, ""
		}
		as.mu.Unlock()
		writeJSON(w, 200, m)
	})
	mux.HandleFunc("POST /register", func(w http.ResponseWriter, r *http.Request) {
		var m oauthex.ClientRegistrationMetadata
		if err := json.NewDecoder(r.Body).Decode(&m); err != nil || len(m.RedirectURIs) == 0 {
			writeJSON(w, 400, map[string]string{"error": "invalid_client_metadata"})
			return
		}
		id := as.mint("client")
		as.mu.Lock()
		as.clients[id] = m.RedirectURIs
		as.mu.Unlock()
		writeJSON(w, 201, map[string]any{"client_id": id, "redirect_uris": m.RedirectURIs, "token_endpoint_auth_method": "none"})
	})
	mux.HandleFunc("GET /authorize", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		as.mu.Lock()
		uris, known := as.clients[q.Get("client_id")]
		user, cimd := as.user, as.cimd
		as.mu.Unlock()
		if cimd != nil && strings.HasPrefix(q.Get("client_id"), "https://") {
			uris, known = as.fetchClientMetadata(r.Context(), cimd, q.Get("client_id"))
		}
		// An exact redirect URI, registered: anything else is refused
		// without redirecting (OAuth 2.1).
		if !known || !slices.Contains(uris, q.Get("redirect_uri")) {
			http.Error(w, "unknown client or redirect_uri", 400)
			return
		}
		if q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" {
			http.Error(w, "PKCE S256 required", 400)
			return
		}
		code := as.mint("code")
		as.mu.Lock()
		as.codes[code] = codeGrant{client: q.Get("client_id"), redirect: q.Get("redirect_uri"), challenge: q.Get("code_challenge"),
			user: user, resource: q.Get("resource")}
		as.mu.Unlock()
		back, _ := url.Parse(q.Get("redirect_uri"))
		back.RawQuery = url.Values{"code": {code}, "state": {q.Get("state")}, "iss": {as.srv.URL}}.Encode()
		http.Redirect(w, r, back.String(), http.StatusFound)
	})
	mux.HandleFunc("POST /token", func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		as.mu.Lock()
		defer as.mu.Unlock()
		var g tokenGrant
		switch r.PostForm.Get("grant_type") {
		case "authorization_code":
			c, ok := as.codes[r.PostForm.Get("code")]
			delete(as.codes, r.PostForm.Get("code")) // one use
			sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
			if !ok || c.client != r.PostForm.Get("client_id") || c.redirect != r.PostForm.Get("redirect_uri") ||
				base64.RawURLEncoding.EncodeToString(sum[:]) != c.challenge {
				writeJSON(w, 400, map[string]string{"error": "invalid_grant"})
				return
			}
			g = tokenGrant{client: c.client, user: c.user}
		case "refresh_token":
			old, ok := as.refresh[r.PostForm.Get("refresh_token")]
			if !ok || as.failRefresh {
				writeJSON(w, 400, map[string]string{"error": "invalid_grant"})
				return
			}
			delete(as.refresh, r.PostForm.Get("refresh_token")) // rotation
			as.refreshes++
			g = old
		default:
			writeJSON(w, 400, map[string]string{"error": "unsupported_grant_type"})
			return
		}
		at, rt := as.mintLocked("at"), as.mintLocked("rt")
		g.exp = time.Now().Add(time.Duration(as.expiresIn) * time.Second)
		as.access[at], as.refresh[rt] = g, g
		// An ID token naming the account, as an OpenID provider sends one
		// (unsigned: the client reads it only to show who signed in).
		claims, _ := json.Marshal(map[string]string{"iss": as.srv.URL, "sub": g.user, "preferred_username": g.user})
		idt := "eyJhbGciOiJub25lIn0." + base64.RawURLEncoding.EncodeToString(claims) + ".x"
		writeJSON(w, 200, map[string]any{"access_token": at, "token_type": "Bearer", "expires_in": as.expiresIn, "refresh_token": rt, "scope": "read", "id_token": idt})
	})
	mux.HandleFunc("POST /revoke", func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		as.mu.Lock()
		defer as.mu.Unlock()
		tok := r.PostForm.Get("token")
		if g, ok := as.refresh[tok]; ok {
			// Revoking a refresh token revokes the grant's access tokens.
			for at, ag := range as.access {
				if ag.user == g.user && ag.client == g.client {
					delete(as.access, at)
				}
			}
		}
		delete(as.refresh, tok)
		delete(as.access, tok)
		as.revocations++
		w.WriteHeader(200)
	})
	as.srv = httptest.NewServer(mux)
	t.Cleanup(as.srv.Close)
	return as
}

// AcceptClientMetadataDocuments makes the server accept client ID metadata
// documents (an https client id naming the client's document, fetched with
// c) instead of dynamic client registration, which it stops offering.
func (as *AS) AcceptClientMetadataDocuments(c *http.Client) {
	as.mu.Lock()
	as.cimd = c
	as.mu.Unlock()
}

// ClientMetadataFetches lists the client ids whose documents it fetched.
func (as *AS) ClientMetadataFetches() []string {
	as.mu.Lock()
	defer as.mu.Unlock()
	return slices.Clone(as.cimdFetches)
}

// fetchClientMetadata fetches the document a client id URL names and
// returns its redirect URIs; the document must name itself as client_id
// (draft-ietf-oauth-client-id-metadata-document, section 4).
func (as *AS) fetchClientMetadata(ctx context.Context, c *http.Client, id string) ([]string, bool) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, id, nil)
	if err != nil {
		return nil, false
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, false
	}
	defer resp.Body.Close()
	var doc struct {
		ClientID     string   `json:"client_id"`
		RedirectURIs []string `json:"redirect_uris"`
		AuthMethod   string   `json:"token_endpoint_auth_method"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&doc) != nil || doc.ClientID != id || doc.AuthMethod != "none" {
		return nil, false
	}
	as.mu.Lock()
	as.cimdFetches = append(as.cimdFetches, id)
	as.mu.Unlock()
	return doc.RedirectURIs, true
}

func (as *AS) mint(prefix string) string {
	as.mu.Lock()
	defer as.mu.Unlock()
	return as.mintLocked(prefix)
}

func (as *AS) mintLocked(prefix string) string {
	s := prefix + "_" + rand.Text()
	as.issued = append(as.issued, s)
	return s
}

func (as *AS) SetUser(u string) { as.mu.Lock(); as.user = u; as.mu.Unlock() }

func (as *AS) Secrets() []string {
	as.mu.Lock()
	defer as.mu.Unlock()
	return slices.Clone(as.issued)
}

// verify is the protected server's token check: a live access token of
// this AS, for this resource.
func (as *AS) verify(_ context.Context, tok string, _ *http.Request) (*auth.TokenInfo, error) {
	as.mu.Lock()
	defer as.mu.Unlock()
	g, ok := as.access[tok]
	if !ok || time.Now().After(g.exp) {
		return nil, auth.ErrInvalidToken
	}
	return &auth.TokenInfo{UserID: g.user, Expiration: g.exp, Scopes: []string{"read"}}, nil
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// newProtectedMCP is an MCP server (go-sdk) behind go-sdk's bearer-token
// middleware, publishing its protected-resource metadata; its `whoami`
// tool answers with the account the token belongs to. It returns the MCP
// endpoint URL.
func NewProtectedMCP(t *testing.T, as *AS) string {
	srv := mcp.NewServer(&mcp.Implementation{Name: "protected", Version: "1"}, nil)
	type none struct{}
	mcp.AddTool(srv, &mcp.Tool{Name: "whoami", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, req *mcp.CallToolRequest, _ none) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: req.Extra.TokenInfo.UserID}}}, nil, nil
		})
	mux := http.NewServeMux()
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	endpoint := hs.URL + "/mcp"
	mux.Handle("/.well-known/oauth-protected-resource/mcp", auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
		Resource: endpoint, AuthorizationServers: []string{as.srv.URL}, ScopesSupported: []string{"read"}}))
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true})
	mux.Handle("/mcp", auth.RequireBearerToken(as.verify, &auth.RequireBearerTokenOptions{
		ResourceMetadataURL: hs.URL + "/.well-known/oauth-protected-resource/mcp"})(h))
	return endpoint
}

// bearer adds a token to every request.
type bearer struct{ tok string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.tok)
	return http.DefaultTransport.RoundTrip(r)
}

// whoami calls the protected server's tool with tok; "" and the error when
// it is refused.
func Whoami(ctx context.Context, endpoint, tok string) (string, error) {
	c := mcp.NewClient(&mcp.Implementation{Name: "marlowe-test", Version: "1"}, nil)
	s, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint, MaxRetries: -1, DisableStandaloneSSE: true,
		HTTPClient: &http.Client{Transport: bearer{tok}}}, nil)
	if err != nil {
		return "", err
	}
	defer s.Close()
	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "whoami"})
	if err != nil {
		return "", err
	}
	return res.Content[0].(*mcp.TextContent).Text, nil
}

// URL is the authorization server's issuer URL.
func (as *AS) URL() string { return as.srv.URL }

// Counts reports how many refreshes and revocations the server accepted.
func (as *AS) Counts() (refreshes, revocations int) {
	as.mu.Lock()
	defer as.mu.Unlock()
	return as.refreshes, as.revocations
}

// FailRefresh makes every refresh fail (true) or work again.
func (as *AS) FailRefresh(fail bool) {
	as.mu.Lock()
	as.failRefresh = fail
	as.mu.Unlock()
}

// SetExpiresIn sets the lifetime, in seconds, of the access tokens issued
// from now on (default 3600).
func (as *AS) SetExpiresIn(s int) {
	as.mu.Lock()
	as.expiresIn = s
	as.mu.Unlock()
}

// DropAccessTokens forgets every access token it issued, as a server does
// when it revokes them on its side (a password change, an admin's
// action) or loses them; refresh tokens still work.
func (as *AS) DropAccessTokens() {
	as.mu.Lock()
	defer as.mu.Unlock()
	clear(as.access)
}
