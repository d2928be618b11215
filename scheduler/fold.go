package scheduler

import (
	"sort"
	"time"

	"github.com/marlowe-bot/marlowe/core"
)

// Outcomes of routine.fired.
const (
	OutcomeFired   = "fired"
	OutcomeSkipped = "skipped"
	OutcomeManual  = "manual"
)

// Routine is one routine as folded from its channel's journal.
type Routine struct {
	ID          string
	Scope       core.Scope // the channel, at top level
	Owner       string
	Spec, TZ    string
	Instruction string
	Armed       bool
	Deleted     bool
	CreatedAt   time.Time
	CreatedSeq  uint64
	// Cursor is the latest scheduled slot decided (fired or skipped): no
	// slot at or before it is considered again.
	Cursor time.Time
	// Firings by command id, in journal order.
	Firings []*Firing
	fired   map[int64]bool // scheduled slots (unix nanos) already journaled
}

// Firing is one routine.fired command and whether its digest was posted.
type Firing struct {
	CmdID     string
	Seq       uint64
	Slot      time.Time
	Outcome   string
	Missed    int
	At        time.Time
	Delivered bool
}

// LastDelivered returns the latest firing whose post is journaled.
func (r *Routine) LastDelivered() *Firing {
	for i := len(r.Firings) - 1; i >= 0; i-- {
		if r.Firings[i].Delivered {
			return r.Firings[i]
		}
	}
	return nil
}

// Fired reports whether the scheduled slot is already journaled.
func (r *Routine) Fired(slot time.Time) bool { return r.fired[slot.UnixNano()] }

// Fold reads one channel's routines from its commands.
func Fold(cmds []core.Command) map[string]*Routine {
	out := map[string]*Routine{}
	byCmd := map[string]*Firing{}
	for _, c := range cmds {
		if c.Redacted() {
			continue
		}
		switch c.Kind() {
		case core.KindRoutineCreated:
			p, err := core.Decode[*core.RoutineCreated](c)
			if err != nil {
				continue
			}
			sc := c.Scope()
			sc.Thread = ""
			out[p.RoutineID] = &Routine{ID: p.RoutineID, Scope: sc, Owner: p.Owner, Spec: p.Cron, TZ: p.TZ,
				Instruction: p.Instruction, Armed: p.Armed, CreatedAt: c.At(), CreatedSeq: c.Seq(), fired: map[int64]bool{}}
		case core.KindRoutineChanged:
			p, err := core.Decode[*core.RoutineChanged](c)
			if err != nil {
				continue
			}
			if r := out[p.RoutineID]; r != nil {
				if p.Cron != "" {
					r.Spec = p.Cron
				}
				if p.TZ != "" {
					r.TZ = p.TZ
				}
				if p.Instruction != "" {
					r.Instruction = p.Instruction
				}
				r.Armed = p.Armed && !p.Deleted
				r.Deleted = r.Deleted || p.Deleted
			}
		case core.KindRoutineFired:
			p, err := core.Decode[*core.RoutineFired](c)
			if err != nil {
				continue
			}
			r := out[p.RoutineID]
			if r == nil {
				continue
			}
			f := &Firing{CmdID: c.ID(), Seq: c.Seq(), Slot: p.Slot.UTC(), Outcome: p.Outcome, Missed: p.Missed, At: c.At()}
			if f.Outcome == "" {
				f.Outcome = OutcomeFired
			}
			r.Firings = append(r.Firings, f)
			byCmd[c.ID()] = f
			if f.Outcome != OutcomeManual {
				r.fired[f.Slot.UnixNano()] = true
				if f.Slot.After(r.Cursor) {
					r.Cursor = f.Slot
				}
			}
		case core.KindMessagePosted:
			if f := byCmd[c.Cause()]; f != nil {
				f.Delivered = true
			}
		}
	}
	return out
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
