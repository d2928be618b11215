package coretest_test

import (
	"testing"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/coretest"
	"github.com/marlowe-bot/marlowe/core/journaltest"
)

// The in-memory journal the core tests run on passes the same conformance
// suite as the real stores.
func TestMemJournalConformance(t *testing.T) {
	journaltest.Run(t, func(t *testing.T, signer *core.Signer) journaltest.Harness {
		j := coretest.NewMemJournal(signer)
		return journaltest.Harness{
			Journal: j,
			Reopen:  func(t *testing.T, s *core.Signer) core.Journal { return j.Reopen(s) },
			Tamper:  j.Tamper(),
		}
	})
}
