package signin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"golang.org/x/oauth2"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/vault"
)

var _ core.Connections = (*Service)(nil)

// Errors of Token. Neither holds token material.
var (
	ErrNotConnected = fmt.Errorf("not connected: %w", core.ErrNotSignedIn)
	ErrReconnect    = fmt.Errorf("the connection lapsed and could not be refreshed: connect again (%w)", core.ErrNotSignedIn)
)

// refreshSkew is how long before its expiry an access token is refreshed,
// so a call never starts with a token about to lapse.
const refreshSkew = 2 * time.Minute

// Token returns person's access token for server, refreshed first when it
// lapses within refreshSkew. A failed refresh drops the grant, records
// refresh_failed (the engine asks the person, in their DM, to connect
// again) and returns ErrReconnect.
func (s *Service) Token(ctx context.Context, platform, person, server string) (string, error) {
	v := s.cfg.Vault
	g, _, ok, err := v.Get(ctx, platform, person, server)
	if errors.Is(err, vault.ErrNoKey) || errors.Is(err, vault.ErrOpen) {
		// Sealed under a key this process no longer has (or altered): as
		// good as lapsed. The person is asked to connect again.
		if _, derr := v.Delete(ctx, platform, person, server); derr != nil {
			return "", fmt.Errorf("drop an unreadable grant: %w", derr)
		}
		s.event(ctx, platform, core.ConnectionChanged{Person: person, Server: server, Event: core.ConnRefreshFailed,
			Reason: "the stored sign-in cannot be opened with the current secrets keys"})
		return "", ErrReconnect
	}
	if err != nil {
		return "", err
	}
	if !ok {
		return "", ErrNotConnected
	}
	now := s.cfg.Now()
	if g.Expiry.IsZero() || now.Add(refreshSkew).Before(g.Expiry) {
		return g.AccessToken, nil
	}
	return s.renew(ctx, platform, person, server, g.AccessToken, "")
}

// Rejected is told that server refused person's access token tok (a 401):
// revoked or lapsed early at the server. While tok is still the stored
// one, the grant is refreshed now; a refresh that fails drops it and asks
// the person to connect again (ErrReconnect), as a lapse does, so a dead
// token is not kept until they notice. A token that is no longer the
// stored one (another call or replica refreshed meanwhile) changes nothing.
func (s *Service) Rejected(ctx context.Context, platform, person, server, tok string) error {
	g, _, ok, err := s.cfg.Vault.Get(ctx, platform, person, server)
	if err != nil || !ok || g.AccessToken != tok {
		return err
	}
	_, err = s.renew(ctx, platform, person, server, tok, "the server refused the token")
	return err
}

// renew refreshes the grant whose access token is stale, once across
// concurrent calls; rejected, when set, says why stale cannot be used
// even if it has not lapsed (and is the reason recorded when no refresh
// token can replace it).
func (s *Service) renew(ctx context.Context, platform, person, server, stale, rejected string) (string, error) {
	v := s.cfg.Vault
	now := s.cfg.Now()
	mu, _ := s.refreshing.LoadOrStore(platform+"/"+person+"/"+server, &sync.Mutex{})
	mu.(*sync.Mutex).Lock()
	defer mu.(*sync.Mutex).Unlock()
	g, c, ok, err := v.Get(ctx, platform, person, server)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", ErrNotConnected
	}
	// Another call may have refreshed while this one waited.
	if g.AccessToken != stale && (g.Expiry.IsZero() || now.Add(refreshSkew).Before(g.Expiry)) {
		return g.AccessToken, nil
	}
	fresh, err := s.refresh(ctx, g)
	if err != nil {
		// Another replica may have refreshed (and rotated the refresh
		// token) in between: its grant is good.
		if g2, _, ok2, err2 := v.Get(ctx, platform, person, server); err2 == nil && ok2 && g2.AccessToken != g.AccessToken &&
			now.Add(refreshSkew).Before(g2.Expiry) {
			return g2.AccessToken, nil
		}
		reason := "the server refused the refresh: " + oauthError(err)
		if g.RefreshToken == "" {
			reason = "the server gave no refresh token"
			if rejected != "" {
				reason = rejected + ", and gave no refresh token"
			}
		}
		if _, derr := v.Delete(ctx, platform, person, server); derr != nil {
			return "", fmt.Errorf("drop a lapsed grant: %w", derr)
		}
		s.event(ctx, platform, core.ConnectionChanged{Person: person, Server: server, Event: core.ConnRefreshFailed, Reason: reason})
		s.cfg.Log.Info("refresh failed; asked to reconnect", "platform", platform, "person", person, "server", server, "reason", reason)
		return "", ErrReconnect
	}
	c.RefreshedAt = now
	if err := v.Put(ctx, c, fresh); err != nil {
		return "", err
	}
	s.event(ctx, platform, core.ConnectionChanged{Person: person, Server: server, Event: core.ConnRefreshed})
	return fresh.AccessToken, nil
}

func (s *Service) refresh(ctx context.Context, g vault.Grant) (vault.Grant, error) {
	if g.RefreshToken == "" {
		return g, errors.New("no refresh token")
	}
	hc := s.cfg.HTTP
	if g.Resource != "" {
		// RFC 8707 and MCP: the resource goes in every token request, the
		// refresh too. Without it a provider may issue a token for itself
		// instead (oidc-provider does when openid is among the scopes:
		// its userinfo's), which the MCP server refuses.
		c := *hc
		c.Transport = withResource{rt: hc.Transport, resource: g.Resource}
		hc = &c
	}
	ctx = context.WithValue(ctx, oauth2.HTTPClient, hc)
	cfg := &oauth2.Config{ClientID: g.ClientID, ClientSecret: g.ClientSecret,
		Endpoint: oauth2.Endpoint{TokenURL: g.TokenURL, AuthStyle: oauth2.AuthStyle(g.AuthStyle)}}
	// An expired copy makes the token source refresh now.
	tok, err := cfg.TokenSource(ctx, &oauth2.Token{RefreshToken: g.RefreshToken, Expiry: time.Unix(1, 0)}).Token()
	if err != nil {
		return g, err
	}
	g.AccessToken, g.Expiry, g.TokenType = tok.AccessToken, tok.Expiry, tok.Type()
	if tok.RefreshToken != "" {
		g.RefreshToken = tok.RefreshToken // rotated (OAuth 2.1 for public clients)
	}
	return g, nil
}

// withResource adds the resource parameter (RFC 8707) to the form of
// each POST it sends: x/oauth2 has no option for it in a refresh.
type withResource struct {
	rt       http.RoundTripper // nil: http.DefaultTransport
	resource string
}

func (w withResource) RoundTrip(r *http.Request) (*http.Response, error) {
	rt := w.rt
	if rt == nil {
		rt = http.DefaultTransport
	}
	if r.Method != http.MethodPost || r.Body == nil {
		return rt.RoundTrip(r)
	}
	b, err := io.ReadAll(r.Body)
	r.Body.Close()
	if err != nil {
		return nil, err
	}
	form, err := url.ParseQuery(string(b))
	if err != nil {
		return nil, err
	}
	form.Set("resource", w.resource)
	body := form.Encode()
	r = r.Clone(r.Context())
	r.Body, r.ContentLength = io.NopCloser(strings.NewReader(body)), int64(len(body))
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader(body)), nil }
	return rt.RoundTrip(r)
}

// List implements core.Connections.
func (s *Service) List(ctx context.Context, platform, person string) ([]core.Connection, error) {
	return s.cfg.Vault.Connections(ctx, platform, person)
}

// Disconnect implements core.Connections: the grant is revoked at the
// authorization server where it has a revocation endpoint (RFC 7009), and
// deleted here in any case.
func (s *Service) Disconnect(ctx context.Context, platform, person, server, by string) (bool, error) {
	g, _, ok, err := s.cfg.Vault.Get(ctx, platform, person, server)
	if err != nil && !errors.Is(err, vault.ErrOpen) && !errors.Is(err, vault.ErrNoKey) {
		return false, err
	}
	revoked := false
	if ok {
		revoked = s.revoke(ctx, g)
	}
	deleted, err := s.cfg.Vault.Delete(ctx, platform, person, server)
	if err != nil || !deleted {
		return false, err
	}
	s.event(ctx, platform, core.ConnectionChanged{Person: person, Server: server, Event: core.ConnRevoked, By: by, Revoked: revoked})
	s.cfg.Log.Info("disconnected", "platform", platform, "person", person, "server", server, "by", by, "revoked_at_server", revoked)
	return true, nil
}

// DisconnectAll implements core.Connections.
func (s *Service) DisconnectAll(ctx context.Context, platform, person, by string) (int, error) {
	cs, err := s.cfg.Vault.Connections(ctx, platform, person)
	if err != nil {
		return 0, err
	}
	n := 0
	var errs []error
	for _, c := range cs {
		ok, err := s.Disconnect(ctx, platform, person, c.Server, by)
		if ok {
			n++
		}
		errs = append(errs, err)
	}
	// Sign-ins still waiting for the person's confirmation go too.
	pending, err := s.cfg.Vault.DropPending(ctx, platform, person)
	for _, g := range pending {
		s.revoke(ctx, g)
	}
	errs = append(errs, err)
	return n, errors.Join(errs...)
}

// revoke asks the authorization server to revoke g's refresh token (which
// revokes the access tokens issued from it) and access token; true if it
// accepted at least one (RFC 7009: 200 OK).
func (s *Service) revoke(ctx context.Context, g vault.Grant) bool {
	if g.RevocationURL == "" {
		return false
	}
	ok := false
	for _, t := range []struct{ tok, hint string }{{g.RefreshToken, "refresh_token"}, {g.AccessToken, "access_token"}} {
		if t.tok == "" {
			continue
		}
		form := url.Values{"token": {t.tok}, "token_type_hint": {t.hint}}
		if g.ClientSecret == "" || oauth2.AuthStyle(g.AuthStyle) == oauth2.AuthStyleInParams {
			form.Set("client_id", g.ClientID)
			if g.ClientSecret != "" {
				form.Set("client_secret", g.ClientSecret)
			}
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.RevocationURL, strings.NewReader(form.Encode()))
		if err != nil {
			return false
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if g.ClientSecret != "" && oauth2.AuthStyle(g.AuthStyle) != oauth2.AuthStyleInParams {
			req.SetBasicAuth(url.QueryEscape(g.ClientID), url.QueryEscape(g.ClientSecret))
		}
		resp, err := s.cfg.HTTP.Do(req)
		if err != nil {
			s.cfg.Log.Warn("revocation request failed", "server_url", g.Resource, "error", "request failed")
			continue
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			ok = true
		}
	}
	return ok
}
