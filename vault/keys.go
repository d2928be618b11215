package vault

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// KeySize is the length of a secrets key: AES-256.
const KeySize = 32

type key struct {
	id   string
	aead cipher.AEAD
}

// Keyring seals with its current key and opens with the current or any old
// key, chosen by the key id stored beside each ciphertext.
type Keyring struct {
	current key
	byID    map[string]key
}

// ErrNoKey is a ciphertext sealed under a key the keyring does not hold.
var ErrNoKey = errors.New("sealed under a secrets key this process does not have (set it in MARLOWE_SECRETS_KEY_OLD)")

// ErrOpen is a ciphertext that does not open: tampered with, moved to
// another row, or sealed under a different key with the same id.
var ErrOpen = errors.New("sealed data does not open")

// ParseKeyring reads MARLOWE_SECRETS_KEY (current) and
// MARLOWE_SECRETS_KEY_OLD (old keys, comma-separated, for reading only).
// Each key is 32 random bytes in base64 (standard or URL alphabet, padded
// or not), e.g. from `openssl rand -base64 32`. Errors name the variable,
// never the key.
func ParseKeyring(current, old string) (*Keyring, error) {
	cur, err := parseKey(current)
	if err != nil {
		return nil, fmt.Errorf("MARLOWE_SECRETS_KEY: %w", err)
	}
	kr := &Keyring{current: cur, byID: map[string]key{cur.id: cur}}
	for i, s := range strings.Split(old, ",") {
		if strings.TrimSpace(s) == "" {
			continue
		}
		k, err := parseKey(s)
		if err != nil {
			return nil, fmt.Errorf("MARLOWE_SECRETS_KEY_OLD, key %d: %w", i+1, err)
		}
		if _, dup := kr.byID[k.id]; !dup {
			kr.byID[k.id] = k
		}
	}
	return kr, nil
}

func parseKey(s string) (key, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return key{}, errors.New("not set")
	}
	var raw []byte
	var err error
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if raw, err = enc.DecodeString(s); err == nil {
			break
		}
	}
	if err != nil {
		return key{}, errors.New("not base64 (want 32 random bytes in base64, e.g. `openssl rand -base64 32`)")
	}
	if len(raw) != KeySize {
		return key{}, fmt.Errorf("decodes to %d bytes, want %d (e.g. `openssl rand -base64 32`)", len(raw), KeySize)
	}
	block, err := aes.NewCipher(raw)
	if err != nil {
		return key{}, fmt.Errorf("aes: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return key{}, fmt.Errorf("gcm: %w", err)
	}
	// The id names the key without revealing it: a hash under a fixed label.
	sum := sha256.Sum256(append([]byte("marlowe-secrets-key-id\x00"), raw...))
	return key{id: "k" + hex.EncodeToString(sum[:6]), aead: aead}, nil
}

// NewKey returns a fresh key in the format ParseKeyring reads.
func NewKey() string {
	b := make([]byte, KeySize)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return base64.StdEncoding.EncodeToString(b)
}

// CurrentID is the id of the key Seal uses.
func (kr *Keyring) CurrentID() string { return kr.current.id }

// Seal encrypts plaintext under the current key, bound to aad. The nonce is
// random (96 bits) and prefixed to the ciphertext.
func (kr *Keyring) Seal(aad, plaintext []byte) (keyID string, sealed []byte) {
	k := kr.current
	nonce := make([]byte, k.aead.NonceSize())
	_, _ = rand.Read(nonce)
	return k.id, k.aead.Seal(nonce, nonce, plaintext, aad)
}

// Open decrypts what Seal made under keyID with aad.
func (kr *Keyring) Open(keyID string, aad, sealed []byte) ([]byte, error) {
	k, ok := kr.byID[keyID]
	if !ok {
		return nil, fmt.Errorf("key %s: %w", keyID, ErrNoKey)
	}
	n := k.aead.NonceSize()
	if len(sealed) < n+k.aead.Overhead() {
		return nil, ErrOpen
	}
	pt, err := k.aead.Open(nil, sealed[:n], sealed[n:], aad)
	if err != nil {
		return nil, ErrOpen
	}
	return pt, nil
}
