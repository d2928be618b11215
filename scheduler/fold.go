package scheduler

import (
	"sort"

	"github.com/marlowe-bot/marlowe/core"
)

// Outcomes of routine.fired.
const (
	OutcomeFired   = core.OutcomeFired
	OutcomeSkipped = core.OutcomeSkipped
	OutcomeManual  = core.OutcomeManual
)

// Routine and Firing are the channel fold's: the scheduler reads routines
// from the same fold as the engine and `bot replay`.
type (
	Routine = core.Routine
	Firing  = core.Firing
)

// Fold reads one channel's routines from its commands.
func Fold(cmds []core.Command) (map[string]*Routine, error) {
	if len(cmds) == 0 {
		return map[string]*Routine{}, nil
	}
	return core.Routines(cmds[0].Channel(), cmds)
}

// sorted returns routines in creation order.
func sorted(m map[string]*Routine) []*Routine {
	out := make([]*Routine, 0, len(m))
	for _, r := range m {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].CreatedAt.Equal(out[j].CreatedAt) {
			return out[i].CreatedAt.Before(out[j].CreatedAt)
		}
		return out[i].ID < out[j].ID
	})
	return out
}
