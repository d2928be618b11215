package scheduler

import (
	"fmt"
	"sort"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/fold"
)

// The scheduler reads routines through core's channel fold, the one fold
// of routine commands: these names are that fold's.

// Outcomes of routine.fired.
const (
	OutcomeFired   = fold.OutcomeFired
	OutcomeSkipped = fold.OutcomeSkipped
	OutcomeManual  = fold.OutcomeManual
)

// Run statuses of a firing.
const (
	RunRunning = fold.FiringRunning
	RunDone    = fold.FiringDone
	RunFailed  = fold.FiringFailed
)

type (
	// Routine is one routine as folded from its channel's journal.
	Routine = fold.Routine
	// Firing is one routine.fired command, its run and whether its post arrived.
	Firing = fold.Firing
	// Stats are what drift is judged on.
	Stats = fold.FiringStats
)

// RunIDFor is the run id of the firing journaled as cmdID at at.
func RunIDFor(cmdID string, at time.Time) string { return fold.RoutineRunID(cmdID, at) }

// Fold reads one channel's routines from its commands (all of them, or
// those since a routine's creation).
func Fold(cmds []core.Command) (map[string]*Routine, error) {
	if len(cmds) == 0 {
		return map[string]*Routine{}, nil
	}
	rs, err := fold.Routines(cmds[0].Channel(), cmds)
	if err != nil {
		return nil, fmt.Errorf("fold routines of %s: %w", cmds[0].Channel(), err)
	}
	return rs, nil
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
