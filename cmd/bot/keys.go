package main

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/marlowe-bot/marlowe/core"
)

const keyFile = "signing.key"

// loadSigner returns the journal signer: from MARLOWE_SIGNING_KEY when set,
// otherwise from the data directory, generating the key on first start.
func loadSigner(cfg config) (*core.Signer, string, error) {
	if cfg.SigningKey != "" {
		key, err := parseKey(cfg.SigningKey)
		if err != nil {
			return nil, "", fmt.Errorf("MARLOWE_SIGNING_KEY: %w", err)
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
		s, err := core.NewSigner(priv)
		return s, path + " (generated)", err
	default:
		return nil, "", fmt.Errorf("read signing key: %w", err)
	}
}

// parseKey accepts a base64 (std or url) ed25519 seed (32 bytes) or full
// private key (64 bytes).
func parseKey(s string) (ed25519.PrivateKey, error) {
	s = strings.TrimSpace(s)
	var b []byte
	var err error
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err = enc.DecodeString(s); err == nil {
			break
		}
	}
	if err != nil {
		return nil, errors.New("not base64")
	}
	switch len(b) {
	case ed25519.SeedSize:
		return ed25519.NewKeyFromSeed(b), nil
	case ed25519.PrivateKeySize:
		return ed25519.PrivateKey(b), nil
	}
	return nil, fmt.Errorf("want a %d-byte seed or %d-byte private key, got %d bytes", ed25519.SeedSize, ed25519.PrivateKeySize, len(b))
}
