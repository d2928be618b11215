package attachments_test

import (
	"testing"

	"github.com/marlowe-bot/marlowe/attachments"
	"github.com/marlowe-bot/marlowe/attachments/attachmentstest"
)

func TestDirBlobsConformance(t *testing.T) {
	attachmentstest.BlobSuite(t, attachments.DirBlobs{Dir: t.TempDir()})
}
