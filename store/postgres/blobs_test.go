package postgres_test

import (
	"testing"

	"github.com/marlowe-bot/marlowe/attachments/attachmentstest"
	"github.com/marlowe-bot/marlowe/core/journaltest"
	"github.com/marlowe-bot/marlowe/internal/testpg"
)

// The blobs table (migration 00012_blobs) holds the blob store's contract.
func TestBlobsConformance(t *testing.T) {
	t.Parallel()
	attachmentstest.BlobSuite(t, open(t, testpg.New(t), journaltest.NewSigner(t)))
}
