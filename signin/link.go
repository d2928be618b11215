package signin

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// A sign-in link is PUBLIC_URL/connect?t=<claims>.<mac>: base64url JSON
// claims (a random link id, platform, person, server, expiry) and an
// HMAC-SHA256 over them with a key derived from the signing key. It is
// sent only to the person's DM; the store makes it single-use.

// LinkTTL is how long a sign-in link can be followed.
const LinkTTL = 10 * time.Minute

// Claims is what a link is bound to.
type Claims struct {
	ID       string `json:"id"`
	Platform string `json:"p"`
	Person   string `json:"u"`
	Server   string `json:"s"`
	Expires  int64  `json:"exp"` // Unix seconds
}

// Errors a link is refused with (shown to the browser, never with secrets).
var (
	ErrLinkInvalid = errors.New("this sign-in link is not valid (it was changed or is not one of Marlowe's)")
	ErrLinkExpired = errors.New("this sign-in link expired: ask Marlowe for a new one")
	ErrLinkUsed    = errors.New("this sign-in link was already used: ask Marlowe for a new one")
)

// Links mints and checks sign-in links.
type Links struct {
	key  []byte
	base string // PUBLIC_URL, without a trailing slash
}

// NewLinks returns links signed with key (at least 32 bytes) under base.
func NewLinks(key []byte, base string) (*Links, error) {
	if len(key) < 32 {
		return nil, errors.New("sign-in links: key shorter than 32 bytes")
	}
	if base == "" {
		return nil, errors.New("sign-in links need MARLOWE_PUBLIC_URL")
	}
	return &Links{key: key, base: strings.TrimRight(base, "/")}, nil
}

// StartPath and CallbackPath are the handlers' paths under PUBLIC_URL;
// ClientMetadataPath serves Marlowe's client ID metadata document.
const (
	StartPath          = "/connect"
	CallbackPath       = "/connect/callback"
	ClientMetadataPath = "/connect/client-metadata.json"
)

// RedirectURI is the exact redirect URI registered with every
// authorization server.
func (l *Links) RedirectURI() string { return l.base + CallbackPath }

// sitePath is p under PUBLIC_URL's own path, as browsers see it: a bot
// served under a path prefix (https://example.com/marlowe behind a proxy)
// gets its form posted and its cookie sent there.
func (l *Links) sitePath(p string) string {
	if u, err := url.Parse(l.base); err == nil {
		return strings.TrimRight(u.Path, "/") + p
	}
	return p
}

// ClientMetadataURL is Marlowe's client id where an authorization server
// accepts client ID metadata documents (draft-ietf-oauth-client-id-metadata-document,
// MCP authorization 2025-11-25): the URL of the document itself. "" when
// PUBLIC_URL is not https, since a client id URL must be https.
func (l *Links) ClientMetadataURL() string {
	if !strings.HasPrefix(l.base, "https://") {
		return ""
	}
	return l.base + ClientMetadataPath
}

// Mint returns a link for person on platform to connect server, valid until
// exp, and its id.
func (l *Links) Mint(platform, person, server string, exp time.Time) string {
	c := Claims{ID: rand.Text(), Platform: platform, Person: person, Server: server, Expires: exp.Unix()}
	body, _ := json.Marshal(c) // strings and an int: cannot fail
	b := base64.RawURLEncoding.EncodeToString(body)
	return l.base + StartPath + "?t=" + b + "." + l.mac(b)
}

func (l *Links) mac(b string) string {
	m := hmac.New(sha256.New, l.key)
	m.Write([]byte("marlowe-signin-link\x00" + b))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// Check verifies token t (the link's t parameter) at now.
func (l *Links) Check(t string, now time.Time) (Claims, error) {
	b, sig, ok := strings.Cut(t, ".")
	if !ok || !hmac.Equal([]byte(sig), []byte(l.mac(b))) {
		return Claims{}, ErrLinkInvalid
	}
	raw, err := base64.RawURLEncoding.DecodeString(b)
	if err != nil {
		return Claims{}, ErrLinkInvalid
	}
	var c Claims
	if err := json.Unmarshal(raw, &c); err != nil || c.ID == "" || c.Person == "" || c.Server == "" || c.Platform == "" {
		return Claims{}, ErrLinkInvalid
	}
	if !now.Before(time.Unix(c.Expires, 0)) {
		return Claims{}, ErrLinkExpired
	}
	return c, nil
}

func (c Claims) String() string {
	return fmt.Sprintf("link %s for %s/%s to %s", c.ID, c.Platform, c.Person, c.Server)
}
