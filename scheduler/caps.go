package scheduler

import (
	"context"
	"fmt"

	"github.com/marlowe-bot/marlowe/core"
)

// live counts the routines of rs that are not deleted (paused routines and
// proposals waiting for their Arm click count), and of those, owner's.
func live(rs map[string]*Routine, owner string) (all, owned int) {
	for _, r := range rs {
		if r.Deleted {
			continue
		}
		all++
		if r.Owner == owner {
			owned++
		}
	}
	return all, owned
}

// underCaps refuses a new routine for owner in sc's channel (whose routines
// are here) when the channel has MaxPerChannel routines already, or owner
// MaxPerOwner across the channels of sc's platform. Callers hold s.mu.
func (s *Scheduler) underCaps(ctx context.Context, sc core.Scope, here map[string]*Routine, owner string) error {
	all, owned := live(here, owner)
	if all >= s.cfg.MaxPerChannel {
		return fmt.Errorf("this channel has %d routines, the cap per channel (MARLOWE_ROUTINE_MAX_PER_CHANNEL=%d): "+
			"delete one (`routines` lists them) before adding another; nothing was added", all, s.cfg.MaxPerChannel)
	}
	chs, err := s.cfg.Journal.Channels(ctx)
	if err != nil {
		return fmt.Errorf("routine: channels: %w", err)
	}
	for _, ch := range chs {
		if ch == sc.Key() || owned >= s.cfg.MaxPerOwner {
			continue
		}
		t, err := s.catchUp(ctx, ch)
		if err != nil {
			return fmt.Errorf("routine: %w", err)
		}
		if t.fold == nil {
			continue // no routine there
		}
		for _, r := range t.fold.RoutinesByID() {
			if !r.Deleted && r.Owner == owner && r.Scope.Platform == sc.Platform {
				owned++
			}
		}
	}
	if owned >= s.cfg.MaxPerOwner {
		return fmt.Errorf("<@%s> owns %d routines, the cap per person (MARLOWE_ROUTINE_MAX_PER_OWNER=%d): "+
			"delete one (`routines` in its channel lists them) before adding another; nothing was added", owner, owned, s.cfg.MaxPerOwner)
	}
	return nil
}
