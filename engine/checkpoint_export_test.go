package engine

import (
	"context"

	"github.com/marlowe-bot/marlowe/core"
)

// LoadChannel loads ch's cache as a first touch does (for the checkpoint
// benchmark).
func LoadChannel(ctx context.Context, e *Engine, ch core.ChannelKey) error {
	_, err := e.channel(ctx, ch)
	return err
}
