package engine

import (
	"context"

	"github.com/marlowe-bot/marlowe/core"
)

// CanReadNow answers the reachability rule's question on sc's platform:
// can person read sc's channel now (core.CanReadNow)? The scheduler asks
// it before a routine acts in its channel for its owner.
func (e *Engine) CanReadNow(ctx context.Context, sc core.Scope, person string) (bool, error) {
	s, err := e.surface(sc.Platform)
	if err != nil {
		return false, err
	}
	return core.CanReadNow(ctx, s, sc.Channel, person)
}
