package intent_test

import (
	"testing"

	"github.com/marlowe-bot/marlowe/intent"
	"github.com/marlowe-bot/marlowe/intent/windowtest"
)

func TestMemoryStoreConformance(t *testing.T) {
	t.Parallel()
	windowtest.Run(t, func(t *testing.T) intent.WindowStore { return intent.NewMemoryStore(nil) })
}
