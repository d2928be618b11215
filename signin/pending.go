package signin

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"golang.org/x/oauth2"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/vault"
)

// Confirmation: a link can reach someone other than its person (forwarded,
// read over a shoulder, leaked from a browser history) before they use it,
// and the browser carries no platform identity. So a finished sign-in is
// only pending: the engine shows its person, on a card in their own DM
// whose buttons only they can press, which account was connected, and
// the grant is used only once they confirm it.

// ConfirmTTL is how long a pending sign-in may be confirmed.
const ConfirmTTL = 30 * time.Minute

// Confirm implements core.Connections.
func (s *Service) Confirm(ctx context.Context, platform, person, id string, accept bool) (string, error) {
	now := s.cfg.Now()
	g, c, err := s.cfg.Vault.TakePending(ctx, platform, person, id, now.Add(-ConfirmTTL))
	if errors.Is(err, vault.ErrPendingStale) {
		// Not confirmed in time: nobody may use it, so it should not stay
		// usable at the server either.
		s.revoke(ctx, g)
		return "", err
	}
	if err != nil {
		return "", err
	}
	if !accept {
		revoked := s.revoke(ctx, g)
		s.event(ctx, platform, core.ConnectionChanged{Person: person, Server: c.Server, Event: core.ConnDeclined, By: person,
			Revoked: revoked, Reason: "not confirmed by its person (connected " + g.Account + ")"})
		s.cfg.Log.Info("pending sign-in declined", "platform", platform, "person", person, "server", c.Server, "revoked_at_server", revoked)
		return c.Server, nil
	}
	// The person's previous grant, if any, is replaced: revoke it first.
	if old, _, ok, err := s.cfg.Vault.Get(ctx, platform, person, c.Server); err == nil && ok {
		s.revoke(ctx, old)
	}
	c.ConnectedAt = now
	if err := s.cfg.Vault.Put(ctx, c, g); err != nil {
		return "", err
	}
	s.event(ctx, platform, core.ConnectionChanged{Person: person, Server: c.Server, Event: core.ConnConnected, By: person, Account: g.Account})
	s.cfg.Log.Info("connected", "platform", platform, "person", person, "server", c.Server)
	return c.Server, nil
}

// SweepPending revokes at their server, and drops, the sign-ins on each of
// platforms that waited longer than ConfirmTTL for their person. The next
// callback purges them too (flow.go), but a quiet platform may see none for
// days, and a pending grant is a live token at its server. Replicas may
// sweep at once: only the sweep that deletes a grant revokes it.
func (s *Service) SweepPending(ctx context.Context, platforms []string) (int, error) {
	before := s.cfg.Now().Add(-ConfirmTTL)
	n := 0
	for _, p := range platforms {
		stale, err := s.cfg.Vault.PurgePending(ctx, p, "", before)
		for _, g := range stale {
			s.revoke(ctx, g)
		}
		n += len(stale)
		if err != nil {
			return n, fmt.Errorf("sweep pending sign-ins on %s: %w", p, err)
		}
	}
	return n, nil
}

// accountOf names the account a token acts as, for the person to check:
// the ID token's name for the user when the server sent one (read without
// its signature: it came straight from the token endpoint over the
// connection we opened, OIDC Core 3.1.3.7), else the issuer and the time.
func accountOf(tok *oauth2.Token, issuer string, at time.Time) string {
	if idt, ok := tok.Extra("id_token").(string); ok {
		if name := idTokenName(idt, issuer); name != "" {
			return core.Truncate(name, 120)
		}
	}
	return "an account at " + issuer + ", signed in " + at.UTC().Format("Jan 2 15:04:05 UTC")
}

func idTokenName(idt, issuer string) string {
	parts := strings.Split(idt, ".")
	if len(parts) != 3 {
		return ""
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return ""
	}
	var c struct {
		Iss               string `json:"iss"`
		Sub               string `json:"sub"`
		Email             string `json:"email"`
		PreferredUsername string `json:"preferred_username"`
		Name              string `json:"name"`
	}
	if json.Unmarshal(b, &c) != nil || c.Sub == "" {
		return ""
	}
	if strings.TrimRight(c.Iss, "/") != strings.TrimRight(issuer, "/") {
		return "" // not this server's: show nothing rather than a claim from elsewhere
	}
	for _, v := range []string{c.Email, c.PreferredUsername, c.Name} {
		if v != "" {
			return v + " (" + c.Sub + ")"
		}
	}
	return c.Sub
}
