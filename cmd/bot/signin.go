package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/marlowe-bot/marlowe/connectors"
	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/signin"
	"github.com/marlowe-bot/marlowe/vault"
)

// Per-person sign-in (docs/connectors.md, "Acting as each person"): with
// MARLOWE_SECRETS_KEY set, people's connections are kept sealed in the
// store and `connections`, `disconnect` and `forget me` manage them; the
// servers in "person" identity mode come from the connectors' config.

// signIn is the wired sign-in service, or nil when not configured.
type signIn struct {
	svc    *signin.Service
	events *lateEvents
}

// newSignIn builds the sign-in service for servers. Without
// MARLOWE_SECRETS_KEY it is nil, unless a server needs it: then serve stops
// with an error naming the variable.
func newSignIn(cfg config, st *stores, servers []signin.Server, log *slog.Logger) (*signIn, error) {
	if cfg.SecretsKey == "" {
		if len(servers) > 0 {
			return nil, fmt.Errorf("connector %q acts as each person (\"identity\": \"person\"): set MARLOWE_SECRETS_KEY (base64 of 32 random bytes, `openssl rand -base64 32`) to seal their sign-ins", servers[0].Name)
		}
		return nil, nil
	}
	keys, err := vault.ParseKeyring(cfg.SecretsKey, cfg.SecretsKeyOld)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if st.Credentials == nil {
		return nil, errors.New("the store keeps no credentials")
	}
	if len(servers) > 0 && !cfg.PublicURLSet {
		log.Warn("MARLOWE_PUBLIC_URL is not set: sign-in links point at "+cfg.PublicURL+", which people's browsers may not reach",
			"configure", "MARLOWE_PUBLIC_URL=https://marlowe.example.com")
	}
	links, err := signin.NewLinks(st.Signer.DeriveKey("signin-links"), cfg.PublicURL)
	if err != nil {
		return nil, fmt.Errorf("sign-in: %w", err)
	}
	ev := &lateEvents{}
	svc, err := signin.New(signin.Config{Vault: vault.New(st.Credentials, keys, log), Links: links, Servers: servers,
		HTTP: &http.Client{Timeout: httpTimeout}, Events: ev, Log: log.With("component", "signin")})
	if err != nil {
		return nil, err
	}
	return &signIn{svc: svc, events: ev}, nil
}

// signInSweepEvery is how often serve revokes sign-ins nobody confirmed in
// time (signin.Service.SweepPending).
const signInSweepEvery = time.Minute

// sweepSignIns sweeps stale pending sign-ins until ctx ends.
func sweepSignIns(ctx context.Context, svc interface {
	SweepPending(context.Context, []string) (int, error)
}, platforms []string, every time.Duration, log *slog.Logger) {
	for ctx.Err() == nil {
		n, err := svc.SweepPending(ctx, platforms)
		switch {
		case err != nil && ctx.Err() == nil:
			log.Warn("could not sweep pending sign-ins", "error", err)
		case n > 0:
			log.Info("revoked sign-ins nobody confirmed in time", "count", n)
		}
		sleepCtx(ctx, every)
	}
}

// httpTimeout bounds one discovery, registration, token or revocation request.
const httpTimeout = 15 * time.Second

// lateEvents hands connection changes to the engine, which is built after
// the service it uses.
type lateEvents struct {
	mu sync.Mutex
	to core.ConnectionEvents
}

func (l *lateEvents) set(to core.ConnectionEvents) {
	l.mu.Lock()
	l.to = to
	l.mu.Unlock()
}

func (l *lateEvents) ConnectionChanged(ctx context.Context, platform string, ev core.ConnectionChanged) error {
	l.mu.Lock()
	to := l.to
	l.mu.Unlock()
	if to == nil {
		return errors.New("not started")
	}
	return to.ConnectionChanged(ctx, platform, ev)
}

// connections is the engine's view of the service (nil-safe).
func (s *signIn) connections() core.Connections {
	if s == nil {
		return nil
	}
	return s.svc
}

// doctorSignIn checks the secrets key, whether a public URL is set for
// sign-in redirects, and each person server's metadata discovery.
func doctorSignIn(ctx context.Context, d *doctor, cfg config, servers []signin.Server) {
	if cfg.SecretsKey == "" {
		if len(servers) > 0 {
			d.add(fail("sign-in", fmt.Sprintf("%d connector(s) act as each person but MARLOWE_SECRETS_KEY is not set", len(servers)),
				"set MARLOWE_SECRETS_KEY to `openssl rand -base64 32` (docs/connectors.md → Acting as each person)"))
			return
		}
		d.add(ok("sign-in", "off: no connector acts as each person and MARLOWE_SECRETS_KEY is not set"))
		return
	}
	keys, err := vault.ParseKeyring(cfg.SecretsKey, cfg.SecretsKeyOld)
	if err != nil {
		d.add(fail("sign-in", err.Error(), "MARLOWE_SECRETS_KEY is base64 of 32 random bytes (`openssl rand -base64 32`); old keys go in MARLOWE_SECRETS_KEY_OLD"))
		return
	}
	where := "MARLOWE_PUBLIC_URL=" + cfg.PublicURL
	if !cfg.PublicURLSet {
		if len(servers) > 0 {
			d.add(fail("sign-in", "MARLOWE_PUBLIC_URL is not set: sign-in links and the OAuth redirect would point at "+cfg.PublicURL,
				"set MARLOWE_PUBLIC_URL to the https address people's browsers reach this bot at"))
		} else {
			d.add(ok("sign-in", "secrets key "+keys.CurrentID()+"; MARLOWE_PUBLIC_URL is not set (needed once a connector acts as each person)"))
		}
		return
	}
	line := fmt.Sprintf("secrets key %s; redirect URI %s%s (%s)", keys.CurrentID(), cfg.PublicURL, signin.CallbackPath, where)
	if len(servers) > 0 && !strings.HasPrefix(cfg.PublicURL, "https://") {
		// Links, the browser's binding cookie and the code coming back
		// would cross the network in clear, and servers that take client
		// ID metadata documents need an https client id.
		d.add(warn("sign-in", line+": not https",
			"serve the bot behind https and set MARLOWE_PUBLIC_URL to that address (http is for a bot only this machine reaches)"))
	} else {
		d.add(ok("sign-in", line))
	}
	if len(servers) == 0 {
		return
	}
	links, err := signin.NewLinks(make([]byte, 32), cfg.PublicURL) // discovery only: no link is minted
	if err != nil {
		d.add(fail("sign-in", err.Error(), "set MARLOWE_PUBLIC_URL"))
		return
	}
	svc, err := signin.New(signin.Config{Vault: vault.New(nil, keys, nil), Links: links, Servers: servers, HTTP: &http.Client{Timeout: httpTimeout}})
	if err != nil {
		d.add(fail("sign-in", err.Error(), "check the connectors' config"))
		return
	}
	for _, sv := range servers {
		cctx, cancel := context.WithTimeout(ctx, httpTimeout)
		prm, asm, err := svc.Discover(cctx, sv)
		cancel()
		if err != nil {
			d.add(fail("sign-in "+sv.Name, err.Error(), "the server must publish OAuth protected-resource metadata (RFC 9728) naming an authorization server with metadata (RFC 8414) and PKCE; or use \"identity\": \"bot\" with headers"))
			continue
		}
		reg := signin.Registration(sv, asm, links)
		if reg == "" {
			d.add(fail("sign-in "+sv.Name, asm.Issuer+": "+signin.NoRegistration(asm, links),
				"register Marlowe there with redirect URI "+links.RedirectURI()+" and put its client id in the connector's config"))
			continue
		}
		d.add(ok("sign-in "+sv.Name, fmt.Sprintf("resource %s, authorization server %s, %s", prm.Resource, asm.Issuer, reg)))
	}
}

// personServers are the connectors in "person" identity mode, as the
// sign-in service knows them.
func personServers(cfg *connectors.Config) []signin.Server {
	if cfg == nil {
		return nil
	}
	var out []signin.Server
	for _, s := range cfg.Servers {
		if s.Identity == connectors.IdentityPerson && !s.Disabled {
			out = append(out, signin.Server{Name: s.Name, URL: s.URL, ClientID: s.OAuthClientID, ClientSecret: s.OAuthClientSecret})
		}
	}
	return out
}

// doctorPersonServers reads the person servers for doctor (a bad file is
// the connectors line's to report).
func doctorPersonServers(getenv func(string) string) []signin.Server {
	cfg, err := loadConnectors(getenv)
	if err != nil {
		return nil
	}
	return personServers(cfg)
}

// tokens is what the connectors ask for each person's token (nil-safe).
func (s *signIn) tokens() func(context.Context, string, string, string) (string, error) {
	if s == nil {
		return nil
	}
	return s.svc.Token
}

// rejected is what the connectors report a refused token to (nil-safe).
func (s *signIn) rejected() func(context.Context, string, string, string, string) error {
	if s == nil {
		return nil
	}
	return s.svc.Rejected
}
