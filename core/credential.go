package core

import (
	"context"
	"errors"
	"time"
)

// Per-person sign-in (docs/connectors.md, "Acting as each person"): a
// connector server in `person` identity mode acts with each requester's own
// OAuth grant. The grants are sealed (encrypted and bound to their row)
// before they reach a store, so a store holds ciphertext and metadata only;
// the key never leaves the process that seals.

// Connection is one person's grant for one connector server as anybody may
// see it: who, which server, since when. It never holds token material.
type Connection struct {
	Platform    string    `json:"platform"`
	Person      string    `json:"person"`
	Server      string    `json:"server"`
	ConnectedAt time.Time `json:"connected_at"`
	RefreshedAt time.Time `json:"refreshed_at,omitzero"`
	// ExpiresAt is when the access token lapses (zero: the server did not
	// say); the sealed refresh token, if any, outlives it.
	ExpiresAt time.Time `json:"expires_at,omitzero"`
}

// SealedGrant is a stored grant: its Connection and the AEAD ciphertext of
// its tokens, sealed with the secrets key named by KeyID and bound (as
// additional data) to platform, person and server.
type SealedGrant struct {
	Connection
	KeyID  string
	Sealed []byte
}

// SignIn is the one-time state of a sign-in link once it was followed:
// the link it came from (LinkID, single-use), the OAuth state it sent the
// browser out with (kept only as a hash), the browser it was followed from
// (a hash of its binding cookie) and, sealed, the PKCE verifier and client
// registration the callback needs.
type SignIn struct {
	LinkID      string
	StateHash   string
	Platform    string
	Person      string
	Server      string
	BrowserHash string
	KeyID       string
	Sealed      []byte
	ExpiresAt   time.Time
}

// ErrNotSignedIn is wrapped by every error that means "this person has no
// usable sign-in to this server": not connected, or lapsed.
var ErrNotSignedIn = errors.New("not signed in")

// ErrSignInUsed is a sign-in link followed a second time.
var ErrSignInUsed = errors.New("sign-in link already used")

// CredentialStore keeps sealed grants per person and server, and the
// one-time state of followed sign-in links, so that a link is used once
// across restarts and replicas.
type CredentialStore interface {
	// PutGrant stores g, replacing the person's grant for that server.
	PutGrant(ctx context.Context, g SealedGrant) error
	// Grant returns the person's grant for server, if any.
	Grant(ctx context.Context, platform, person, server string) (SealedGrant, bool, error)
	// Grants lists the grants on platform, of person ("" lists everybody's),
	// ordered by person then server.
	Grants(ctx context.Context, platform, person string) ([]SealedGrant, error)
	// DeleteGrant deletes the person's grant for server; false if none.
	DeleteGrant(ctx context.Context, platform, person, server string) (bool, error)
	// DeleteGrants deletes every grant of person on platform (`forget me`),
	// returning how many there were.
	DeleteGrants(ctx context.Context, platform, person string) (int, error)

	// BeginSignIn records that a link was followed. A link already
	// recorded, completed or not, is refused with ErrSignInUsed.
	BeginSignIn(ctx context.Context, s SignIn) error
	// CompleteSignIn takes the sign-in whose state hashes to stateHash,
	// once: a second call, an unknown state or one past its expiry at now
	// returns false. A taken sign-in stays recorded (its link stays used).
	CompleteSignIn(ctx context.Context, stateHash string, now time.Time) (SignIn, bool, error)
	// PurgeSignIns forgets sign-ins that expired before now; their links
	// expired too, so forgetting them cannot let one be used again.
	PurgeSignIns(ctx context.Context, before time.Time) (int, error)
}

// Connection events, journaled as connection.changed in the person's DM.
const (
	ConnConnected     = "connected"
	ConnRefreshed     = "refreshed"
	ConnRefreshFailed = "refresh_failed" // the person is asked to connect again
	ConnRevoked       = "revoked"        // disconnected, forgotten, or dropped after a failed refresh
)

// ConnectionChanged (connection.changed): a person's connection to a
// connector server was made, refreshed, lost or revoked. It names who,
// which server and what happened, never a token.
type ConnectionChanged struct {
	Person string `json:"person"`
	Server string `json:"server"`
	Event  string `json:"event"`            // one of the Conn* constants
	By     string `json:"by,omitempty"`     // who asked for a revocation (the person, an operator), "" for the system
	Reason string `json:"reason,omitempty"` // why, in words, for refresh failures and revocations
	// Revoked reports whether the authorization server confirmed the
	// revocation (false: it has no revocation endpoint or refused).
	Revoked bool `json:"revoked_at_server,omitempty"`
}

// ConnectionEvents receives connection changes: the engine journals them
// in the person's DM and, on a failed refresh, asks the person (never the
// channel) to connect again.
type ConnectionEvents interface {
	ConnectionChanged(ctx context.Context, platform string, ev ConnectionChanged) error
}

// Connections is what the chat commands `connections`, `disconnect
// <server>` and `forget me` need of the sign-in service.
type Connections interface {
	// List lists person's connections on platform ("" for everybody's).
	List(ctx context.Context, platform, person string) ([]Connection, error)
	// Disconnect revokes person's grant for server at the server where it
	// can and deletes it; ok is false if there was none.
	Disconnect(ctx context.Context, platform, person, server, by string) (ok bool, err error)
	// DisconnectAll does Disconnect for each of person's connections.
	DisconnectAll(ctx context.Context, platform, person, by string) (int, error)
	// Link mints a private sign-in link for person to connect server.
	Link(platform, person, server string) (string, error)
}
