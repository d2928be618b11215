package core

import (
	"context"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
)

// KeyIDLen is the length of a key id: hex digits of sha256(public key).
const KeyIDLen = 16

// KeyID names an ed25519 public key in the journal: the first 16 hex digits
// (64 bits) of the sha256 of its 32 bytes. It only selects which trusted key
// checks a signature, so a collision cannot make a forged row verify.
func KeyID(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return hex.EncodeToString(sum[:])[:KeyIDLen]
}

// Signer seals drafts into signed Commands. Journals hold one; nothing else
// needs it.
type Signer struct {
	key ed25519.PrivateKey
	pub ed25519.PublicKey
	id  string
}

// NewSigner wraps an ed25519 private key.
func NewSigner(key ed25519.PrivateKey) (*Signer, error) {
	if len(key) != ed25519.PrivateKeySize {
		return nil, fmt.Errorf("signing key: want %d bytes, got %d", ed25519.PrivateKeySize, len(key))
	}
	pub := key.Public().(ed25519.PublicKey)
	return &Signer{key: key, pub: pub, id: KeyID(pub)}, nil
}

// Public returns the signer's public key.
func (s *Signer) Public() ed25519.PublicKey { return slices.Clone(s.pub) }

// KeyID returns the id every command this signer seals carries.
func (s *Signer) KeyID() string { return s.id }

// Verifier returns a verifier that trusts this signer's key alone.
func (s *Signer) Verifier() *Verifier {
	v, _ := NewVerifier(s.pub) // the size was checked by NewSigner
	return v
}

// Seal assigns the journal position, names the key and signs. Journals call
// it inside the transaction that appends, with the channel's current head.
func (s *Signer) Seal(d Draft, seq uint64, prev Hash) (Command, error) {
	if d.IsZero() {
		return Command{}, errors.New("seal: empty draft")
	}
	if seq == 0 {
		return Command{}, errors.New("seal: seq starts at 1")
	}
	c := d.c
	c.seq = seq
	c.prev = prev
	c.key = s.id
	c.sig = ed25519.Sign(s.key, c.CanonicalHeader())
	return c, nil
}

// DeriveKey returns a 32-byte secret for another purpose (card tokens, say),
// derived from the signing key so it is stable across restarts without a
// second secret to configure.
func (s *Signer) DeriveKey(purpose string) []byte {
	m := hmac.New(sha256.New, s.key.Seed())
	m.Write([]byte("marlowe/" + purpose))
	return m.Sum(nil)
}

// Verifier checks signatures and payload hashes against a set of trusted
// public keys: the current signing key's and any retired ones. It needs no
// private key.
type Verifier struct {
	keys map[string]ed25519.PublicKey
	ids  []string // in the order given, for messages and for keyless rows
}

// NewVerifier trusts the given ed25519 public keys (at least one;
// duplicates are ignored).
func NewVerifier(pubs ...ed25519.PublicKey) (*Verifier, error) {
	if len(pubs) == 0 {
		return nil, errors.New("verify keys: none given")
	}
	v := &Verifier{keys: map[string]ed25519.PublicKey{}}
	for i, pub := range pubs {
		if len(pub) != ed25519.PublicKeySize {
			return nil, fmt.Errorf("verify key %d: want %d bytes, got %d", i+1, ed25519.PublicKeySize, len(pub))
		}
		id := KeyID(pub)
		if _, dup := v.keys[id]; dup {
			continue
		}
		v.keys[id] = slices.Clone(pub)
		v.ids = append(v.ids, id)
	}
	return v, nil
}

// KeyIDs lists the trusted key ids in the order they were given.
func (v *Verifier) KeyIDs() []string { return slices.Clone(v.ids) }

// Trusts reports whether the key with this id is trusted.
func (v *Verifier) Trusts(id string) bool {
	_, ok := v.keys[id]
	return ok
}

// UntrustedKeyError: a command names a signing key that is not trusted.
type UntrustedKeyError struct {
	Key string
}

func (e *UntrustedKeyError) Error() string {
	return fmt.Sprintf("signature by key %s, which is not a trusted key", e.Key)
}

// Verify checks one command on its own: payload hash (unless redacted) and
// signature. A command that names its key is checked with that key only; a
// row written before key ids is accepted if any trusted key verifies it.
// Chain links and redactions are checked by ChainVerifier.
func (v *Verifier) Verify(c Command) error {
	if !c.kind.Valid() {
		return fmt.Errorf("invalid kind")
	}
	if !c.redacted && sha256.Sum256(c.payload) != c.payloadHash {
		return fmt.Errorf("payload hash mismatch")
	}
	return v.checkSig(c)
}

// checkSig checks the signature over c's header alone.
func (v *Verifier) checkSig(c Command) error {
	msg := c.CanonicalHeader()
	if c.key != "" {
		pub, ok := v.keys[c.key]
		if !ok {
			return &UntrustedKeyError{Key: c.key}
		}
		if !ed25519.Verify(pub, msg, c.sig) {
			return fmt.Errorf("bad signature (key %s)", c.key)
		}
		return nil
	}
	for _, id := range v.ids {
		if ed25519.Verify(v.keys[id], msg, c.sig) {
			return nil
		}
	}
	return fmt.Errorf("bad signature (row without a key id: no trusted key verifies it)")
}

// SignerProblem is a channel whose newest command is not signed by a
// trusted key.
type SignerProblem struct {
	Channel ChannelKey
	Seq     uint64
	Key     string // "" for a row written before key ids
}

// CheckNewestSigners checks the newest command of every channel (the one at
// its recorded head: two primary-key lookups per channel, no scan) against
// v, and returns the channels whose newest command is signed by a key v
// does not trust: a key id v does not hold, or, for a row without a key id,
// a signature no trusted key verifies. A service that appended with a key
// and was restarted with another one finds itself here. Rows are not
// otherwise verified: that is VerifyAll's job.
func CheckNewestSigners(ctx context.Context, j Journal, v *Verifier) ([]SignerProblem, error) {
	chs, err := j.Channels(ctx)
	if err != nil {
		return nil, fmt.Errorf("check signers: list channels: %w", err)
	}
	var out []SignerProblem
	for _, ch := range chs {
		seq, _, err := j.Head(ctx, ch)
		if err != nil {
			return nil, fmt.Errorf("check signers: head of %s: %w", ch, err)
		}
		cmds, err := j.Read(ctx, ch, seq, 1)
		if err != nil {
			return nil, fmt.Errorf("check signers: read %s seq %d: %w", ch, seq, err)
		}
		if len(cmds) == 0 || cmds[0].Seq() != seq {
			continue // a missing head row is tampering: verify reports it
		}
		c := cmds[0]
		switch {
		case c.key != "" && !v.Trusts(c.key):
			out = append(out, SignerProblem{Channel: ch, Seq: seq, Key: c.key})
		case c.key == "" && v.checkSig(c) != nil:
			out = append(out, SignerProblem{Channel: ch, Seq: seq})
		}
	}
	return out, nil
}
