package postgres_test

import (
	"testing"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/deliverytest"
	"github.com/marlowe-bot/marlowe/internal/testpg"
)

func TestDeliveryQueue(t *testing.T) {
	t.Parallel()
	deliverytest.Run(t, func(t *testing.T) core.DeliveryQueue {
		return open(t, testpg.Pooled(testpg.New(t), 4), nil)
	})
}
