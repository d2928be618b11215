package signin

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/vault"
)

// Server is a connector server whose calls act as each person.
type Server struct {
	Name string
	URL  string // the MCP endpoint: the protected resource
	// ClientID (and ClientSecret) name a client registered beforehand with
	// the server's authorization server; empty: dynamic client
	// registration (RFC 7591).
	ClientID     string
	ClientSecret string
}

// Config wires a Service.
type Config struct {
	Vault   *vault.Vault
	Links   *Links
	Servers []Server
	// HTTP is the client for discovery, registration, tokens and
	// revocation (default http.DefaultClient).
	HTTP   *http.Client
	Events core.ConnectionEvents // may be nil
	Now    func() time.Time
	Log    *slog.Logger
}

// Service runs sign-ins and hands out each person's tokens.
type Service struct {
	cfg     Config
	servers map[string]Server
	// refreshing serialises refreshes of one grant in this process: with
	// rotating refresh tokens, two at once would have one refused and the
	// grant dropped. (Across replicas, the loser re-reads the winner's.)
	refreshing sync.Map // platform/person/server → *sync.Mutex
	// crossOrigin refuses a sign-in started by another site's form
	// (http.go).
	crossOrigin *http.CrossOriginProtection
}

// New returns a sign-in service.
func New(cfg Config) (*Service, error) {
	if cfg.Vault == nil || cfg.Links == nil {
		return nil, errors.New("sign-in: a vault and links are required")
	}
	if cfg.HTTP == nil {
		cfg.HTTP = http.DefaultClient
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	s := &Service{cfg: cfg, servers: map[string]Server{}, crossOrigin: http.NewCrossOriginProtection()}
	// The public URL's origin is ours even when a proxy rewrites Host.
	if u, err := url.Parse(cfg.Links.base); err == nil && u.Scheme != "" && u.Host != "" {
		_ = s.crossOrigin.AddTrustedOrigin(u.Scheme + "://" + u.Host)
	}
	for _, sv := range cfg.Servers {
		if sv.Name == "" || sv.URL == "" {
			return nil, fmt.Errorf("sign-in: server %q needs a name and a url", sv.Name)
		}
		s.servers[sv.Name] = sv
	}
	return s, nil
}

// Link mints a sign-in link for person to connect server.
func (s *Service) Link(platform, person, server string) (string, error) {
	if _, ok := s.servers[server]; !ok {
		return "", fmt.Errorf("no server %q acts as each person", server)
	}
	return s.cfg.Links.Mint(platform, person, server, s.cfg.Now().Add(LinkTTL)), nil
}

// flowTTL bounds the time between following a link and the callback.
const flowTTL = 10 * time.Minute

// pending is what the callback needs, sealed in the store between the
// redirect and the callback.
type pending struct {
	Verifier      string `json:"v"`
	ClientID      string `json:"cid"`
	ClientSecret  string `json:"cs,omitempty"`
	AuthStyle     int    `json:"as"`
	AuthURL       string `json:"au"`
	TokenURL      string `json:"tu"`
	RevocationURL string `json:"ru,omitempty"`
	Issuer        string `json:"iss"`
	IssSupported  bool   `json:"isss,omitempty"`
	Resource      string `json:"res"`
	Scopes        []string
}

func hash(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// Start follows a sign-in link from a browser identified by browser (its
// binding cookie): it checks the link, marks it used, discovers the
// server's authorization server, registers a client when needed and
// returns the authorization URL to send the browser to.
func (s *Service) Start(ctx context.Context, token, browser string) (string, Claims, error) {
	now := s.cfg.Now()
	c, err := s.cfg.Links.Check(token, now)
	if err != nil {
		return "", Claims{}, err
	}
	srv, ok := s.servers[c.Server]
	if !ok {
		return "", c, fmt.Errorf("%s: no such server acts as each person any more", c.Server)
	}
	ctx = context.WithValue(ctx, oauth2.HTTPClient, s.cfg.HTTP)
	p, err := s.prepare(ctx, srv)
	if err != nil {
		return "", c, err
	}
	state := rand.Text()
	p.Verifier = oauth2.GenerateVerifier()
	exp := now.Add(flowTTL)
	if le := time.Unix(c.Expires, 0); le.After(exp) {
		exp = le // never before the link's own expiry: purging must not free a live link
	}
	si := core.SignIn{LinkID: c.ID, StateHash: hash(state), Platform: c.Platform, Person: c.Person, Server: c.Server,
		BrowserHash: hash(browser), ExpiresAt: exp}
	// Followed links whose sign-ins expired are forgotten as new ones come
	// (their links expired too, so none can be used again).
	if _, err := s.cfg.Vault.Store().PurgeSignIns(ctx, now.Add(-time.Hour)); err != nil {
		s.cfg.Log.Warn("could not purge expired sign-ins", "error", err)
	}
	if err := s.cfg.Vault.BeginSignIn(ctx, si, p); err != nil {
		if errors.Is(err, core.ErrSignInUsed) {
			return "", c, ErrLinkUsed
		}
		return "", c, err
	}
	oc := p.config(s.cfg.Links.RedirectURI())
	opts := []oauth2.AuthCodeOption{oauth2.S256ChallengeOption(p.Verifier), oauth2.SetAuthURLParam("resource", p.Resource)}
	if slices.Contains(p.Scopes, "offline_access") {
		// OpenID Connect Core §11: offline_access needs prompt=consent, or
		// the provider drops it and issues no refresh token (oidc-provider
		// does), and the person would have to sign in again when the
		// access token lapses.
		opts = append(opts, oauth2.SetAuthURLParam("prompt", "consent"))
	}
	return oc.AuthCodeURL(state, opts...), c, nil
}

func (p *pending) config(redirect string) *oauth2.Config {
	return &oauth2.Config{ClientID: p.ClientID, ClientSecret: p.ClientSecret, RedirectURL: redirect, Scopes: p.Scopes,
		Endpoint: oauth2.Endpoint{AuthURL: p.AuthURL, TokenURL: p.TokenURL, AuthStyle: oauth2.AuthStyle(p.AuthStyle)}}
}

// Discover finds srv's protected-resource metadata and its authorization
// server's metadata (doctor uses it too).
func (s *Service) Discover(ctx context.Context, srv Server) (*oauthex.ProtectedResourceMetadata, *oauthex.AuthServerMeta, error) {
	prm, err := s.resourceMetadata(ctx, srv.URL)
	if err != nil {
		return nil, nil, err
	}
	asm, err := auth.GetAuthServerMetadata(ctx, prm.AuthorizationServers[0], s.cfg.HTTP)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: authorization server metadata: %w", srv.Name, err)
	}
	if asm == nil {
		return nil, nil, fmt.Errorf("%s: the authorization server %s publishes no metadata", srv.Name, prm.AuthorizationServers[0])
	}
	if !slices.Contains(asm.CodeChallengeMethodsSupported, "S256") {
		// OAuth 2.1 and MCP require PKCE; a server that does not say it
		// supports S256 is not used (MCP authorization spec).
		return nil, nil, fmt.Errorf("%s: the authorization server does not advertise PKCE (S256)", srv.Name)
	}
	return prm, asm, nil
}

// resourceMetadata follows RFC 9728: the URL a 401's WWW-Authenticate
// names, else the well-known URL at the endpoint's path, else at the root.
func (s *Service) resourceMetadata(ctx context.Context, resource string) (*oauthex.ProtectedResourceMetadata, error) {
	var tried []string
	if u := s.challengeMetadataURL(ctx, resource); u != "" {
		tried = append(tried, u)
	}
	ru, err := url.Parse(resource)
	if err != nil {
		return nil, fmt.Errorf("server url %q: %w", resource, err)
	}
	mu := *ru
	mu.RawQuery, mu.Fragment = "", ""
	mu.Path = "/.well-known/oauth-protected-resource/" + strings.TrimLeft(ru.Path, "/")
	tried = append(tried, mu.String())
	var errs []error
	for _, u := range tried {
		prm, err := oauthex.GetProtectedResourceMetadata(ctx, u, resource, s.cfg.HTTP)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if len(prm.AuthorizationServers) == 0 {
			return nil, fmt.Errorf("protected resource metadata at %s names no authorization server", u)
		}
		return prm, nil
	}
	return nil, fmt.Errorf("no protected resource metadata for %s: %w", resource, errors.Join(errs...))
}

// challengeMetadataURL asks the server without a token and reads the
// resource_metadata of its 401 challenge, if any.
func (s *Service) challengeMetadataURL(ctx context.Context, resource string) string {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, resource, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	if err != nil {
		return ""
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := s.cfg.HTTP.Do(req)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	if resp.StatusCode != http.StatusUnauthorized {
		return ""
	}
	cs, err := oauthex.ParseWWWAuthenticate(resp.Header.Values("WWW-Authenticate"))
	if err != nil {
		return ""
	}
	for _, c := range cs {
		if u := c.Params["resource_metadata"]; u != "" {
			return u
		}
	}
	return ""
}

// prepare discovers srv and settles the client the flow uses.
func (s *Service) prepare(ctx context.Context, srv Server) (*pending, error) {
	prm, asm, err := s.Discover(ctx, srv)
	if err != nil {
		return nil, err
	}
	p := &pending{AuthURL: asm.AuthorizationEndpoint, TokenURL: asm.TokenEndpoint, RevocationURL: asm.RevocationEndpoint,
		Issuer: asm.Issuer, IssSupported: asm.AuthorizationResponseIssParameterSupported, Resource: prm.Resource,
		Scopes: prm.ScopesSupported}
	if slices.Contains(asm.ScopesSupported, "offline_access") && !slices.Contains(p.Scopes, "offline_access") {
		p.Scopes = append(slices.Clone(p.Scopes), "offline_access")
	}
	switch {
	case srv.ClientID != "":
		p.ClientID, p.ClientSecret = srv.ClientID, srv.ClientSecret
		p.AuthStyle = int(styleFor(asm.TokenEndpointAuthMethodsSupported, srv.ClientSecret != ""))
	case asm.ClientIDMetadataDocumentSupported && s.cfg.Links.ClientMetadataURL() != "":
		// A client ID metadata document: the client id is the URL of
		// Marlowe's document (served by Handler), which the authorization
		// server fetches and whose redirect URI it holds the request to.
		// A public client: no secret, PKCE. Preferred to registering.
		p.ClientID, p.AuthStyle = s.cfg.Links.ClientMetadataURL(), int(oauth2.AuthStyleInParams)
	case asm.RegistrationEndpoint != "":
		reg, err := s.register(ctx, asm.RegistrationEndpoint, p.Scopes)
		if err != nil {
			return nil, fmt.Errorf("%s: dynamic client registration: %w", srv.Name, err)
		}
		p.ClientID, p.ClientSecret = reg.ClientID, reg.ClientSecret
		p.AuthStyle = int(styleFor([]string{reg.TokenEndpointAuthMethod}, reg.ClientSecret != ""))
	default:
		return nil, fmt.Errorf("%s: %s", srv.Name, NoRegistration(asm, s.cfg.Links))
	}
	return p, nil
}

// register registers Marlowe as a public client at endpoint (RFC 7591),
// naming the scopes it will ask for. A server that refuses the metadata
// over the scope is asked again without it: the scope of a registration
// is optional, and a server's own list need not hold its resources'
// scopes (oidc-provider refuses "scope must only contain Authorization
// Server supported scope values" when the protected resource's scopes,
// issued through resource indicators, are not among its own).
func (s *Service) register(ctx context.Context, endpoint string, scopes []string) (*oauthex.ClientRegistrationResponse, error) {
	meta := &oauthex.ClientRegistrationMetadata{
		RedirectURIs: []string{s.cfg.Links.RedirectURI()}, ClientName: "Marlowe",
		GrantTypes: []string{"authorization_code", "refresh_token"}, ResponseTypes: []string{"code"},
		TokenEndpointAuthMethod: "none", Scope: strings.Join(scopes, " "),
	}
	reg, err := oauthex.RegisterClient(ctx, endpoint, meta, s.cfg.HTTP)
	if re := (*oauthex.ClientRegistrationError)(nil); errors.As(err, &re) && re.ErrorCode == "invalid_client_metadata" && meta.Scope != "" {
		meta.Scope = ""
		reg, err = oauthex.RegisterClient(ctx, endpoint, meta, s.cfg.HTTP)
	}
	return reg, err
}

// NoRegistration says why no client can be settled with asm without a
// configured client id (doctor shows it too).
func NoRegistration(asm *oauthex.AuthServerMeta, l *Links) string {
	if asm.ClientIDMetadataDocumentSupported {
		return "the authorization server accepts only client ID metadata documents, which need an https MARLOWE_PUBLIC_URL (it is " +
			l.base + "), or a configured client id"
	}
	return "the authorization server offers neither client ID metadata documents nor dynamic client registration; configure a client id for it"
}

// Registration names how a client is settled for srv at asm: the
// configured client, a client ID metadata document or dynamic client
// registration; "" when none can be (NoRegistration says why).
func Registration(srv Server, asm *oauthex.AuthServerMeta, l *Links) string {
	switch {
	case srv.ClientID != "":
		return "client " + srv.ClientID
	case asm.ClientIDMetadataDocumentSupported && l.ClientMetadataURL() != "":
		return "client ID metadata document " + l.ClientMetadataURL()
	case asm.RegistrationEndpoint != "":
		return "dynamic client registration"
	}
	return ""
}

func styleFor(methods []string, secret bool) oauth2.AuthStyle {
	post, basic := slices.Contains(methods, "client_secret_post"), slices.Contains(methods, "client_secret_basic")
	switch {
	case !secret:
		return oauth2.AuthStyleInParams // a public client: its id in the form
	case post && !basic:
		return oauth2.AuthStyleInParams
	case basic && !post:
		return oauth2.AuthStyleInHeader
	default:
		return oauth2.AuthStyleAutoDetect // x/oauth2 tries Basic, then the form
	}
}

// Errors of the callback.
var (
	ErrStateUnknown   = errors.New("this sign-in is unknown, already finished or expired: ask Marlowe for a new link")
	ErrOtherBrowser   = errors.New("this sign-in was started in another browser: ask Marlowe for a new link and finish it where you open it")
	ErrWrongIssuer    = errors.New("the sign-in answer came from an unexpected authorization server")
	ErrDeniedAtServer = errors.New("the sign-in was not approved at the server")
)

// Callback completes the sign-in the authorization server redirected the
// browser back with (query q), from a browser identified by browser.
func (s *Service) Callback(ctx context.Context, q url.Values, browser string) (core.Connection, error) {
	state := q.Get("state")
	if state == "" {
		return core.Connection{}, ErrStateUnknown
	}
	now := s.cfg.Now()
	var p pending
	si, ok, err := s.cfg.Vault.CompleteSignIn(ctx, hash(state), now, &p)
	if err != nil {
		return core.Connection{}, err
	}
	if !ok {
		return core.Connection{}, ErrStateUnknown
	}
	if hash(browser) != si.BrowserHash {
		return core.Connection{}, ErrOtherBrowser
	}
	if e := q.Get("error"); e != "" {
		return core.Connection{}, fmt.Errorf("%w (%s)", ErrDeniedAtServer, core.Truncate(e, 60))
	}
	if iss := q.Get("iss"); (iss != "" || p.IssSupported) && strings.TrimRight(iss, "/") != strings.TrimRight(p.Issuer, "/") {
		return core.Connection{}, ErrWrongIssuer // RFC 9207: mix-up defence
	}
	ctx = context.WithValue(ctx, oauth2.HTTPClient, s.cfg.HTTP)
	tok, err := p.config(s.cfg.Links.RedirectURI()).Exchange(ctx, q.Get("code"),
		oauth2.VerifierOption(p.Verifier), oauth2.SetAuthURLParam("resource", p.Resource))
	if err != nil {
		return core.Connection{}, fmt.Errorf("%s: the authorization server refused the code: %s", si.Server, oauthError(err))
	}
	conn := core.Connection{Platform: si.Platform, Person: si.Person, Server: si.Server, ConnectedAt: now}
	g := vault.Grant{AccessToken: tok.AccessToken, RefreshToken: tok.RefreshToken, TokenType: tok.Type(), Expiry: tok.Expiry,
		ClientID: p.ClientID, ClientSecret: p.ClientSecret, Issuer: p.Issuer, TokenURL: p.TokenURL,
		RevocationURL: p.RevocationURL, AuthStyle: p.AuthStyle, Resource: p.Resource}
	if sc, ok := tok.Extra("scope").(string); ok {
		g.Scope = sc
	}
	g.Account = accountOf(tok, p.Issuer, now)
	// Whoever followed the link signed in: the grant waits, unusable, for
	// its person to confirm it on a card in their own DM (pending.go).
	// Everybody's on the platform, so that the sign-in of someone who
	// never comes back does not stay live at the server.
	if _, err := s.SweepPending(ctx, []string{si.Platform}); err != nil {
		s.cfg.Log.Warn("could not purge expired pending sign-ins", "error", err)
	}
	id := rand.Text()
	if err := s.cfg.Vault.PutPending(ctx, conn, id, g); err != nil {
		return core.Connection{}, err
	}
	s.event(ctx, si.Platform, core.ConnectionChanged{Person: si.Person, Server: si.Server, Event: core.ConnPending,
		Pending: id, Account: g.Account})
	s.cfg.Log.Info("signed in; waiting for the person's confirmation", "platform", si.Platform, "person", si.Person, "server", si.Server)
	conn.ExpiresAt = g.Expiry
	return conn, nil
}

// oauthError names an OAuth error without echoing the response body (which
// may hold anything the server sent).
func oauthError(err error) string {
	if re := (*oauth2.RetrieveError)(nil); errors.As(err, &re) {
		if re.ErrorCode != "" {
			return re.ErrorCode
		}
		if re.Response != nil {
			return re.Response.Status
		}
	}
	return "request failed"
}

func (s *Service) event(ctx context.Context, platform string, ev core.ConnectionChanged) {
	if s.cfg.Events == nil {
		return
	}
	if err := s.cfg.Events.ConnectionChanged(ctx, platform, ev); err != nil {
		s.cfg.Log.Warn("could not record a connection change", "person", ev.Person, "server", ev.Server, "event", ev.Event, "error", err)
	}
}
