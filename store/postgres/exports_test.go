package postgres_test

import (
	"testing"

	"github.com/marlowe-bot/marlowe/core/exporttest"
	"github.com/marlowe-bot/marlowe/core/journaltest"
	"github.com/marlowe-bot/marlowe/internal/testpg"
)

// The exports table (migration 00013_exports) holds the export store's
// contract.
func TestExportsConformance(t *testing.T) {
	t.Parallel()
	exporttest.Suite(t, open(t, testpg.New(t), journaltest.NewSigner(t)))
}
