package coretest_test

import (
	"testing"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/coretest"
	"github.com/marlowe-bot/marlowe/core/deliverytest"
)

func TestMemDeliveryQueue(t *testing.T) {
	deliverytest.Run(t, func(*testing.T) core.DeliveryQueue { return coretest.NewMemDeliveryQueue() })
}
