package memory_test

import (
	"testing"

	"github.com/marlowe-bot/marlowe/core/coretest"
	"github.com/marlowe-bot/marlowe/memory/memorytest"
)

// TestConformanceInProcess runs the suite over the in-process index and
// journal: the service's behaviour without a database.
func TestConformanceInProcess(t *testing.T) {
	t.Parallel()
	signer := coretest.NewSigner(t)
	j := coretest.NewMemJournal(signer)
	ix := memorytest.NewMemIndex()
	memorytest.Run(t, func(t *testing.T) memorytest.Harness {
		return memorytest.Harness{Journal: j, Index: ix, Verifier: signer.Verifier()}
	})
}
