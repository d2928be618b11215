package main

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Signing-key mistakes, each refused with what is wrong and the fix:
// text that is not base64, a value of the wrong length, and a public key
// pasted in (`bot keys --public` of the key file, or of the key that
// signed the journal); doctor calls a malformed key malformed, not
// missing, and does not send the user to MARLOWE_DATA_DIR.
func TestSigningKeyMistakes(t *testing.T) {
	dir := t.TempDir()
	seedJournal(t, dir, 1) // generates the key file and signs with it
	public, err := runBot(t, env(map[string]string{"MARLOWE_DATA_DIR": dir}), "", "keys", "--public")
	if err != nil {
		t.Fatal(err)
	}
	public = strings.TrimSpace(public)
	// Elsewhere: the journal, without its key file.
	moved := t.TempDir()
	seedJournal(t, moved, 1)
	movedPub, err := runBot(t, env(map[string]string{"MARLOWE_DATA_DIR": moved}), "", "keys", "--public")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(moved, keyFile)); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, dir, key string
		want           []string
	}{
		{"not base64", dir, "not-a-key!", []string{"MARLOWE_SIGNING_KEY is malformed: not base64", "bot keys generate"}},
		{"wrong length", dir, base64.StdEncoding.EncodeToString(make([]byte, 16)), []string{"MARLOWE_SIGNING_KEY is malformed", "got 16 bytes", "bot keys generate"}},
		{"public key of the key file", dir, public, []string{"MARLOWE_SIGNING_KEY holds a public key", "bot keys --public", "MARLOWE_VERIFY_KEYS"}},
		{"public key of the journal's signer", moved, strings.TrimSpace(movedPub), []string{"MARLOWE_SIGNING_KEY holds the public key of key", "which signed this journal"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := env(map[string]string{"MARLOWE_DATA_DIR": c.dir, "MARLOWE_SIGNING_KEY": c.key, "MARLOWE_HTTP_ADDR": "127.0.0.1:0", "MARLOWE_SANDBOX_ADDR": "127.0.0.1:0"})
			_, err := runBot(t, e, "", "serve")
			if err == nil {
				t.Fatal("serve started")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("serve: %q lacks %q", err, w)
				}
			}
			out, _ := runBot(t, e, "", "doctor")
			if strings.Contains(out, "no signing key is configured") || strings.Contains(out, "set MARLOWE_DATA_DIR") {
				t.Errorf("doctor calls the key missing:\n%s", out)
			}
			if !strings.Contains(out, c.want[0]) {
				t.Errorf("doctor lacks %q:\n%s", c.want[0], out)
			}
		})
	}
}
