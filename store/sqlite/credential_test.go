package sqlite_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/vault/vaulttest"
)

func TestCredentialStore(t *testing.T) {
	t.Parallel()
	vaulttest.Run(t, func(t *testing.T) vaulttest.Harness {
		path := filepath.Join(t.TempDir(), "journal.db")
		s := open(t, path, nil)
		return vaulttest.Harness{
			Store:  s,
			Reopen: func(t *testing.T) core.CredentialStore { return open(t, path, nil) },
			Dump: func(t *testing.T) []byte {
				// The database files themselves, WAL included.
				var out []byte
				for _, p := range []string{path, path + "-wal"} {
					b, err := os.ReadFile(p)
					if err != nil && !os.IsNotExist(err) {
						t.Fatal(err)
					}
					out = append(out, b...)
				}
				return out
			},
		}
	})
}
