package sqlite_test

import (
	"path/filepath"
	"testing"

	"github.com/marlowe-bot/marlowe/core/exporttest"
	"github.com/marlowe-bot/marlowe/core/journaltest"
)

// The exports table (migration 00013_exports) holds the export store's
// contract.
func TestExportsConformance(t *testing.T) {
	t.Parallel()
	exporttest.Suite(t, open(t, filepath.Join(t.TempDir(), "exports.db"), journaltest.NewSigner(t)))
}
