// Package signin lets each person connect their own account on a connector
// server that acts as the person who asked (`"identity": "person"`): a
// private sign-in link (link.go), the OAuth 2.1 authorization-code flow with
// PKCE against the server's authorization server, discovered from its
// protected-resource metadata with go-sdk's auth and oauthex packages and
// with a preregistered client, a client ID metadata document (Marlowe's,
// served under MARLOWE_PUBLIC_URL) or dynamic registration (flow.go), the
// HTTP handlers under MARLOWE_PUBLIC_URL (http.go), a finished sign-in kept
// pending until its person confirms it on a card in their own DM, since
// whoever followed the link may have used another account (pending.go),
// and tokens refreshed before they lapse and revoked on disconnect
// (tokens.go).
//
// Grants are kept sealed by package vault. Nothing here logs, journals or
// returns token material: events carry person, server and what happened.
//
// Why not go-sdk's auth.AuthorizationCodeHandler: it runs the whole flow in
// one goroutine waiting for the redirect. Here the browser's callback may
// reach another replica, or this one after a restart, so the flow is split
// at the redirect and its state (verifier, client) is sealed in the store.
//
// It imports core, vault, go-sdk's auth/oauthex and x/oauth2; never engine.
package signin
