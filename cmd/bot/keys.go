package main

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/marlowe-bot/marlowe/core"
)

const keyFile = "signing.key"

// readSigner returns the configured signing key without ever creating one:
// MARLOWE_SIGNING_KEY when set, otherwise the key file in the data
// directory; a nil signer when there is neither.
func readSigner(cfg config) (*core.Signer, string, error) {
	if cfg.SigningKey != "" {
		key, err := parseSigningKey(cfg)
		if err != nil {
			return nil, "", err
		}
		s, err := core.NewSigner(key)
		return s, "MARLOWE_SIGNING_KEY", err
	}
	path := filepath.Join(cfg.DataDir, keyFile)
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		key, err := parseKey(string(b))
		if err != nil {
			return nil, "", fmt.Errorf("signing key %s: %w", path, err)
		}
		s, err := core.NewSigner(key)
		return s, path, err
	case errors.Is(err, fs.ErrNotExist):
		return nil, "", nil
	default:
		return nil, "", fmt.Errorf("read signing key: %w", err)
	}
}

// loadSigner returns the journal signer for serve: readSigner's, or, on the
// first start of an embedded install, a new key written to the data
// directory.
func loadSigner(cfg config) (*core.Signer, string, error) {
	s, src, err := readSigner(cfg)
	if err != nil || s != nil {
		return s, src, err
	}
	path := filepath.Join(cfg.DataDir, keyFile)
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, "", fmt.Errorf("create data directory: %w", err)
	}
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, "", fmt.Errorf("generate signing key: %w", err)
	}
	enc := base64.StdEncoding.EncodeToString(priv.Seed()) + "\n"
	// Write a temporary file, then link it into place: the key file
	// appears whole or not at all, and if another process starting at
	// the same moment won the race, its key is the one used.
	tmp, err := os.CreateTemp(cfg.DataDir, keyFile+".tmp-*")
	if err != nil {
		return nil, "", fmt.Errorf("write signing key: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return nil, "", fmt.Errorf("write signing key: %w", err)
	}
	if _, err := tmp.WriteString(enc); err != nil {
		tmp.Close()
		return nil, "", fmt.Errorf("write signing key: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return nil, "", fmt.Errorf("write signing key: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return nil, "", fmt.Errorf("write signing key: %w", err)
	}
	if err := os.Link(tmp.Name(), path); errors.Is(err, fs.ErrExist) {
		return loadSigner(cfg)
	} else if err != nil {
		return nil, "", fmt.Errorf("write signing key: %w", err)
	}
	s, err = core.NewSigner(priv)
	return s, path + " (generated)", err
}

// errMalformedKey marks a MARLOWE_SIGNING_KEY that is not a private key
// (doctor then checks no journal against it).
var errMalformedKey = errors.New("malformed signing key")

// parseSigningKey reads MARLOWE_SIGNING_KEY, refusing what people paste
// there by mistake, each with the fix: text that is not base64, a value of
// the wrong length, and a public key (what `bot keys --public` prints: 32
// bytes, like a seed, so it would be taken for a new private key and sign
// with a key nobody trusts). A public key is recognised when it is the
// public half of a key known here: the data directory's key file or one
// listed in MARLOWE_VERIFY_KEYS.
func parseSigningKey(cfg config) (ed25519.PrivateKey, error) {
	const fix = "set it to the line `bot keys generate` prints (or unset it to use the key file in MARLOWE_DATA_DIR)"
	v := strings.TrimSpace(cfg.SigningKey)
	b, err := decodeBase64(v)
	if err != nil {
		return nil, fmt.Errorf("MARLOWE_SIGNING_KEY is malformed: not base64 (%d characters): %s: %w", len(v), fix, errMalformedKey)
	}
	if len(b) == ed25519.PublicKeySize {
		known := map[string]string{}
		if f, _, err := readSigner(config{DataDir: cfg.DataDir}); err == nil && f != nil {
			known[string(f.Public())] = "the key file " + filepath.Join(cfg.DataDir, keyFile)
		}
		if pubs, err := parsePublicKeys(cfg.VerifyKeys); err == nil {
			for _, p := range pubs {
				known[string(p)] = "MARLOWE_VERIFY_KEYS"
			}
		}
		if where, ok := known[string(b)]; ok {
			return nil, fmt.Errorf("MARLOWE_SIGNING_KEY holds a public key (key %s, from %s: what `bot keys --public` prints), not a private one: "+
				"set it to the private key (the content of the key file, or a new line from `bot keys generate`); public keys go in MARLOWE_VERIFY_KEYS: %w",
				core.KeyID(ed25519.PublicKey(b)), where, errMalformedKey)
		}
	}
	key, err := parseKey(v)
	if err != nil {
		return nil, fmt.Errorf("MARLOWE_SIGNING_KEY is malformed: %v (a seed is 44 base64 characters): %s: %w", err, fix, errMalformedKey)
	}
	return key, nil
}

// parseKey accepts a base64 (std or url) ed25519 seed (32 bytes) or full
// private key (64 bytes).
func parseKey(s string) (ed25519.PrivateKey, error) {
	b, err := decodeBase64(strings.TrimSpace(s))
	if err != nil {
		return nil, err
	}
	switch len(b) {
	case ed25519.SeedSize:
		return ed25519.NewKeyFromSeed(b), nil
	case ed25519.PrivateKeySize:
		return ed25519.PrivateKey(b), nil
	}
	return nil, fmt.Errorf("want a %d-byte seed or %d-byte private key, got %d bytes", ed25519.SeedSize, ed25519.PrivateKeySize, len(b))
}

// decodeBase64 accepts standard or URL base64, padded or not.
func decodeBase64(s string) ([]byte, error) {
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			return b, nil
		}
	}
	return nil, errors.New("not base64")
}

// parsePublicKeys reads MARLOWE_VERIFY_KEYS: comma-separated base64 ed25519
// public keys (32 bytes each). A 64-byte value is a private key put in the
// wrong place and is refused; a 32-byte seed cannot be told from a public
// key and simply verifies nothing.
func parsePublicKeys(s string) ([]ed25519.PublicKey, error) {
	var out []ed25519.PublicKey
	for i, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		b, err := decodeBase64(f)
		if err != nil {
			return nil, fmt.Errorf("MARLOWE_VERIFY_KEYS: entry %d: %w", i+1, err)
		}
		switch len(b) {
		case ed25519.PublicKeySize:
			out = append(out, ed25519.PublicKey(b))
		case ed25519.PrivateKeySize:
			return nil, fmt.Errorf("MARLOWE_VERIFY_KEYS: entry %d is a private key: list public keys only (bot keys prints a key's public half)", i+1)
		default:
			return nil, fmt.Errorf("MARLOWE_VERIFY_KEYS: entry %d: want a %d-byte ed25519 public key, got %d bytes", i+1, ed25519.PublicKeySize, len(b))
		}
	}
	return out, nil
}

// trustedVerifier trusts the current signing key (when there is one) and
// the retired public keys in MARLOWE_VERIFY_KEYS; nil when there are none.
func trustedVerifier(cfg config, current *core.Signer) (*core.Verifier, error) {
	pubs, err := parsePublicKeys(cfg.VerifyKeys)
	if err != nil {
		return nil, err
	}
	if current != nil {
		pubs = append([]ed25519.PublicKey{current.Public()}, pubs...)
	}
	if len(pubs) == 0 {
		return nil, nil
	}
	return core.NewVerifier(pubs...)
}

func encodePublic(pub ed25519.PublicKey) string { return base64.StdEncoding.EncodeToString(pub) }

// fileKeyHint: when the data directory's key file holds key id but is not
// in use (MARLOWE_SIGNING_KEY overrides it), say so and give its public
// key: after a switch to MARLOWE_SIGNING_KEY it is the retired key.
func fileKeyHint(cfg config, id string) string {
	if cfg.SigningKey == "" || id == "" {
		return ""
	}
	s, _, err := readSigner(config{DataDir: cfg.DataDir})
	if err != nil || s == nil || s.KeyID() != id {
		return ""
	}
	return fmt.Sprintf(" The key in %s is key %s; its public key is %s.",
		filepath.Join(cfg.DataDir, keyFile), id, encodePublic(s.Public()))
}

// cmdKeys runs `bot keys [--public]` (the current key's public half and id,
// and the retired keys trusted for verification) and `bot keys generate` (a
// new private key for MARLOWE_SIGNING_KEY on stdout). Neither stores a key.
func cmdKeys(cfg config, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "generate" {
		if len(args) > 1 {
			return usageErr("keys generate takes no arguments")
		}
		pub, priv, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			return fmt.Errorf("generate key: %w", err)
		}
		fmt.Fprintln(stdout, base64.StdEncoding.EncodeToString(priv.Seed()))
		fmt.Fprintf(stderr, "new signing key %s, public key %s\nSet the line above as MARLOWE_SIGNING_KEY; list the old key's public key in MARLOWE_VERIFY_KEYS (docs/journal.md).\n",
			core.KeyID(pub), encodePublic(pub))
		return nil
	}
	flags := flag.NewFlagSet("keys", flag.ContinueOnError)
	flags.SetOutput(stderr)
	public := flags.Bool("public", false, "print only the current public key (for MARLOWE_VERIFY_KEYS elsewhere)")
	if err := flags.Parse(args); err != nil {
		return usageErr("keys: %v", err)
	}
	if flags.NArg() > 0 {
		return usageErr("keys: unknown argument %q (bot keys [--public] | bot keys generate)", flags.Arg(0))
	}
	s, src, err := readSigner(cfg)
	if err != nil {
		return err
	}
	retired, err := parsePublicKeys(cfg.VerifyKeys)
	if err != nil {
		return err
	}
	if s == nil {
		return exitError{code: 2, err: fmt.Errorf("keys: no signing key: set MARLOWE_SIGNING_KEY (bot keys generate makes one), or start serve once to generate %s",
			filepath.Join(cfg.DataDir, keyFile))}
	}
	if *public {
		fmt.Fprintln(stdout, encodePublic(s.Public()))
		return nil
	}
	fmt.Fprintf(stdout, "key id: %s\npublic key: %s\nsource: %s\n", s.KeyID(), encodePublic(s.Public()), src)
	for _, pub := range retired {
		fmt.Fprintf(stdout, "verify key (MARLOWE_VERIFY_KEYS): %s %s\n", core.KeyID(pub), encodePublic(pub))
	}
	return nil
}

// checkJournalSigners refuses to serve on a journal whose newest commands
// were signed by a key that is neither the current one nor listed in
// MARLOWE_VERIFY_KEYS: the signing key changed and the old one was not kept
// for verification, so every later `bot verify` would fail. It reads one
// command per channel.
func checkJournalSigners(ctx context.Context, cfg config, st *stores) (*core.Verifier, error) {
	v, err := trustedVerifier(cfg, st.Signer)
	if err != nil {
		return nil, err
	}
	problems, err := core.CheckNewestSigners(ctx, st.Journal, v)
	if err != nil {
		return nil, err
	}
	if len(problems) == 0 {
		return v, nil
	}
	byKey := map[string][]string{}
	var keys []string
	for _, p := range problems {
		if _, ok := byKey[p.Key]; !ok {
			keys = append(keys, p.Key)
		}
		byKey[p.Key] = append(byKey[p.Key], fmt.Sprintf("%s seq %d", p.Channel, p.Seq))
	}
	var b strings.Builder
	for _, k := range keys {
		chs := byKey[k]
		more := ""
		if len(chs) > 3 {
			chs, more = chs[:3], fmt.Sprintf(" and %d more channel(s)", len(chs)-3)
		}
		name := "key " + k
		if k == "" {
			name = "a key from before key ids"
		}
		fmt.Fprintf(&b, "the journal's newest command in %s%s is signed by %s, ", strings.Join(chs, ", "), more, name)
	}
	if raw, err := decodeBase64(strings.TrimSpace(cfg.SigningKey)); err == nil && len(raw) == ed25519.PublicKeySize && byKey[core.KeyID(ed25519.PublicKey(raw))] != nil {
		// The public key of the very key that signed the journal.
		return nil, fmt.Errorf("MARLOWE_SIGNING_KEY holds the public key of key %s, which signed this journal (what `bot keys --public` prints), not a private key: "+
			"set it to that key's private key (its key file, or the MARLOWE_SIGNING_KEY it was made with)", core.KeyID(ed25519.PublicKey(raw)))
	}
	fmt.Fprintf(&b, "which is neither the current signing key (%s, from %s) nor listed in MARLOWE_VERIFY_KEYS. "+
		"If the signing key was changed, add the old key's public key to MARLOWE_VERIFY_KEYS (docs/journal.md).", st.Signer.KeyID(), st.KeySrc)
	b.WriteString(fileKeyHint(cfg, keys[0]))
	return nil, errors.New(b.String())
}
