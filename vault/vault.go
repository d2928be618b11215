package vault

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/marlowe-bot/marlowe/core"
)

// Grant is the token material of one person's connection to one server,
// and what refreshing and revoking it needs. It prints, logs and marshals as
// "[sealed]": only the vault serialises it, sealed.
type Grant struct {
	AccessToken  string
	RefreshToken string
	TokenType    string
	Expiry       time.Time
	Scope        string

	// The client this grant was issued to (dynamic client registration
	// or preregistered) and the authorization server's endpoints.
	ClientID      string
	ClientSecret  string
	Issuer        string
	TokenURL      string
	RevocationURL string
	AuthStyle     int    // oauth2.AuthStyle of the token endpoint
	Resource      string // RFC 8707 resource indicator: the MCP server's URL
}

func (Grant) String() string                  { return "[sealed]" }
func (Grant) GoString() string                { return "vault.Grant{[sealed]}" }
func (Grant) LogValue() slog.Value            { return slog.StringValue("[sealed]") }
func (Grant) MarshalJSON() ([]byte, error)    { return []byte(`"[sealed]"`), nil }
func (g Grant) Format(f fmt.State, verb rune) { fmt.Fprint(f, "[sealed]") }

// sealedGrant is Grant's sealed wire form.
type sealedGrant struct {
	AccessToken   string    `json:"at"`
	RefreshToken  string    `json:"rt,omitempty"`
	TokenType     string    `json:"tt,omitempty"`
	Expiry        time.Time `json:"exp,omitzero"`
	Scope         string    `json:"scope,omitempty"`
	ClientID      string    `json:"cid,omitempty"`
	ClientSecret  string    `json:"cs,omitempty"`
	Issuer        string    `json:"iss,omitempty"`
	TokenURL      string    `json:"tok,omitempty"`
	RevocationURL string    `json:"rev,omitempty"`
	AuthStyle     int       `json:"as,omitempty"`
	Resource      string    `json:"res,omitempty"`
}

// Vault keeps Grants in a core.CredentialStore, sealed.
type Vault struct {
	store core.CredentialStore
	keys  *Keyring
	log   *slog.Logger
}

// New returns a vault over store sealing with keys.
func New(store core.CredentialStore, keys *Keyring, log *slog.Logger) *Vault {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Vault{store: store, keys: keys, log: log}
}

// Store is the store underneath, for what is not secret (listing).
func (v *Vault) Store() core.CredentialStore { return v.store }

// aad binds a ciphertext to what it belongs to.
func aad(kind, platform, person, server string) []byte {
	return []byte("marlowe-" + kind + "\x00" + platform + "\x00" + person + "\x00" + server)
}

// Put seals g and stores it as c's grant (c's times are kept as given).
func (v *Vault) Put(ctx context.Context, c core.Connection, g Grant) error {
	pt, err := json.Marshal(sealedGrant(g))
	if err != nil {
		return fmt.Errorf("seal grant of %s for %s: %w", c.Person, c.Server, err)
	}
	c.ExpiresAt = g.Expiry
	id, sealed := v.keys.Seal(aad("grant", c.Platform, c.Person, c.Server), pt)
	clear(pt)
	return v.store.PutGrant(ctx, core.SealedGrant{Connection: c, KeyID: id, Sealed: sealed})
}

// Get opens the person's grant for server. A grant sealed under an old key
// is sealed again under the current one (best effort: reading succeeds even
// when the rewrite fails).
func (v *Vault) Get(ctx context.Context, platform, person, server string) (Grant, core.Connection, bool, error) {
	sg, ok, err := v.store.Grant(ctx, platform, person, server)
	if err != nil || !ok {
		return Grant{}, core.Connection{}, false, err
	}
	pt, err := v.keys.Open(sg.KeyID, aad("grant", platform, person, server), sg.Sealed)
	if err != nil {
		return Grant{}, core.Connection{}, false, fmt.Errorf("open grant of %s for %s: %w", person, server, err)
	}
	var w sealedGrant
	err = json.Unmarshal(pt, &w)
	clear(pt)
	if err != nil {
		return Grant{}, core.Connection{}, false, fmt.Errorf("open grant of %s for %s: malformed", person, server)
	}
	g := Grant(w)
	if sg.KeyID != v.keys.CurrentID() {
		if err := v.Put(ctx, sg.Connection, g); err != nil {
			v.log.Warn("could not reseal a grant under the current secrets key", "person", person, "server", server, "error", err)
		}
	}
	return g, sg.Connection, true, nil
}

// Connections lists person's connections on platform ("" lists everybody's,
// for admins): metadata only, nothing is opened.
func (v *Vault) Connections(ctx context.Context, platform, person string) ([]core.Connection, error) {
	gs, err := v.store.Grants(ctx, platform, person)
	if err != nil {
		return nil, err
	}
	out := make([]core.Connection, 0, len(gs))
	for _, g := range gs {
		out = append(out, g.Connection)
	}
	return out, nil
}

// Delete deletes the person's grant for server.
func (v *Vault) Delete(ctx context.Context, platform, person, server string) (bool, error) {
	return v.store.DeleteGrant(ctx, platform, person, server)
}

// DeleteAll deletes every grant of person on platform.
func (v *Vault) DeleteAll(ctx context.Context, platform, person string) (int, error) {
	return v.store.DeleteGrants(ctx, platform, person)
}

// BeginSignIn seals secret (what the callback needs: the PKCE verifier,
// the client) into si and records it; core.ErrSignInUsed if the link was
// followed before.
func (v *Vault) BeginSignIn(ctx context.Context, si core.SignIn, secret any) error {
	pt, err := json.Marshal(secret)
	if err != nil {
		return fmt.Errorf("seal sign-in: %w", err)
	}
	si.KeyID, si.Sealed = v.keys.Seal(aad("signin", si.Platform, si.Person, si.Server+"\x00"+si.StateHash), pt)
	clear(pt)
	return v.store.BeginSignIn(ctx, si)
}

// CompleteSignIn takes the sign-in of stateHash once and opens its secret
// into secret.
func (v *Vault) CompleteSignIn(ctx context.Context, stateHash string, now time.Time, secret any) (core.SignIn, bool, error) {
	si, ok, err := v.store.CompleteSignIn(ctx, stateHash, now)
	if err != nil || !ok {
		return core.SignIn{}, false, err
	}
	pt, err := v.keys.Open(si.KeyID, aad("signin", si.Platform, si.Person, si.Server+"\x00"+si.StateHash), si.Sealed)
	if err != nil {
		return core.SignIn{}, false, fmt.Errorf("open sign-in: %w", err)
	}
	err = json.Unmarshal(pt, secret)
	clear(pt)
	if err != nil {
		return core.SignIn{}, false, fmt.Errorf("open sign-in: malformed")
	}
	return si, true, nil
}
