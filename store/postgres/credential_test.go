package postgres_test

import (
	"testing"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/internal/testpg"
	"github.com/marlowe-bot/marlowe/vault/vaulttest"
)

func TestCredentialStore(t *testing.T) {
	t.Parallel()
	vaulttest.Run(t, func(t *testing.T) vaulttest.Harness {
		url := testpg.Pooled(testpg.New(t), 4)
		s := open(t, url, nil)
		return vaulttest.Harness{
			Store:  s,
			Reopen: func(t *testing.T) core.CredentialStore { return open(t, url, nil) },
			Dump: func(t *testing.T) []byte {
				// Every column of every row, as Postgres prints it.
				var out []byte
				for _, q := range []string{`SELECT g::text, encode(sealed, 'escape') FROM grants g`, `SELECT s::text, encode(sealed, 'escape') FROM signins s`} {
					rows, err := s.Pool().Query(t.Context(), q)
					if err != nil {
						t.Fatal(err)
					}
					for rows.Next() {
						var a, b string
						if err := rows.Scan(&a, &b); err != nil {
							t.Fatal(err)
						}
						out = append(append(out, a...), b...)
					}
					rows.Close()
				}
				return out
			},
		}
	})
}
