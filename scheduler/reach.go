package scheduler

import (
	"context"

	"github.com/marlowe-bot/marlowe/core"
)

// Reacher is an optional Engine capability: whether a person can read a
// room now, asked of the platform (engine.Engine.CanReadNow, the
// reachability rule of docs/architecture.md).
type Reacher interface {
	CanReadNow(ctx context.Context, sc core.Scope, person string) (bool, error)
}

// ownerCannotRead says why r may not act in its channel now: a routine
// posts (and runs its tools) for its owner, so its owner must still be
// able to read the channel, as for any post made for someone. "" when
// they can, or when the engine cannot tell. A failed check skips too.
func (s *Scheduler) ownerCannotRead(ctx context.Context, r *Routine) string {
	re, ok := s.eng.(Reacher)
	if !ok {
		return ""
	}
	can, err := re.CanReadNow(ctx, r.Scope, r.Owner)
	switch {
	case err != nil:
		s.cfg.Logger.WarnContext(ctx, "routine owner's access could not be checked; skipping", "routine", r.ID, "error", err)
		return "its owner's access to this channel could not be checked"
	case !can:
		return "its owner cannot read this channel now"
	}
	return ""
}
