package sqlite_test

import (
	"path/filepath"
	"testing"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/deliverytest"
)

func TestDeliveryQueue(t *testing.T) {
	t.Parallel()
	deliverytest.Run(t, func(t *testing.T) core.DeliveryQueue {
		return open(t, filepath.Join(t.TempDir(), "journal.db"), nil)
	})
}
