package scheduler

import (
	"sort"
	"time"
	"unicode/utf8"

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
	// CreatedID is the routine.created command's id; Proposed says it was
	// created disarmed (the model proposed it) and awaits its owner's Arm.
	CreatedID string
	Proposed  bool
	// ArmedAt is when a person last armed it (created armed, resumed, or a
	// proposal's Arm click): slots before it never fire.
	ArmedAt time.Time
	// RescheduledAt is when an edit last changed its spec or zone: slots
	// of the new schedule before it never fire (nor count as missed).
	RescheduledAt time.Time
	// Decided says a routine.changed has followed its creation (a proposal
	// is armed or discarded only once).
	Decided bool
	// Cursor is the latest scheduled slot decided (fired or skipped): no
	// slot at or before it is considered again.
	Cursor time.Time
	// Firings by command id, in journal order.
	Firings []*Firing
	// Epoch is the seq of the command that last set the routine's spec or
	// instruction (its creation or an edit): firings after it settle a new
	// drift anchor, and the anchor before it is kept for comparison.
	Epoch uint64
	fired map[int64]bool // scheduled slots (unix nanos) already journaled
}

// Firing is one routine.fired command, its run (with a model) and whether
// its post arrived. Run status and delivery are separate: a run can finish
// and its post still fail.
type Firing struct {
	CmdID     string
	Seq       uint64
	Slot      time.Time
	Outcome   string
	Missed    int
	Reason    string
	At        time.Time
	Delivered bool
	// Epoch is the routine's epoch when it fired.
	Epoch uint64
	// RunID is the id its unattended run has (or will have) when a model
	// answers: fixed by the firing, so a slot never starts two runs.
	RunID string
	// Started: run.started is journaled. RunStatus is "" (none), running,
	// done, failed or the paused status.
	Started   bool
	RunStatus string
	// Answer is the run's final text (the digest text without a model).
	Answer string
	Tools  []string
	Stats  Stats
	runAt  time.Time
}

// Stats are what drift is judged on.
type Stats struct {
	OutputChars int // the answer's size before any cap
	Duration    time.Duration
	ToolCalls   int
	ToolErrors  int
}

// Succeeded reports whether the firing did its work and its post arrived.
func (f *Firing) Succeeded() bool {
	return f.Outcome != OutcomeSkipped && f.Delivered && (!f.Started || f.RunStatus == RunDone)
}

// Run statuses of a firing.
const (
	RunRunning = "running"
	RunDone    = "done"
	RunFailed  = "failed"
)

// RunIDFor is the run id of the firing journaled as cmdID at at.
func RunIDFor(cmdID string, at time.Time) string { return core.KeyedID("routine-run:"+cmdID, at) }

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
	byRun := map[string]*Firing{}
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
			// Only a person arms a routine: one created by anyone else (a
			// run's schedule_routine call) is a disarmed proposal.
			armed := p.Armed && c.Actor().Type == core.ActorHuman
			r := &Routine{ID: p.RoutineID, Scope: sc, Owner: p.Owner, Spec: p.Cron, TZ: p.TZ,
				Instruction: p.Instruction, Armed: armed, CreatedAt: c.At(), CreatedSeq: c.Seq(), Epoch: c.Seq(), fired: map[int64]bool{},
				CreatedID: c.ID(), Proposed: !armed}
			if armed {
				r.ArmedAt = c.At()
			}
			out[p.RoutineID] = r
		case core.KindRoutineChanged:
			p, err := core.Decode[*core.RoutineChanged](c)
			if err != nil {
				continue
			}
			if r := out[p.RoutineID]; r != nil {
				r.Decided = true
				if p.Cron != "" || p.TZ != "" || p.Instruction != "" {
					r.Epoch = c.Seq() // an edit re-settles the anchor
				}
				if p.Cron != "" || p.TZ != "" {
					r.RescheduledAt = c.At()
				}
				if p.Cron != "" {
					r.Spec = p.Cron
				}
				if p.TZ != "" {
					r.TZ = p.TZ
				}
				if p.Instruction != "" {
					r.Instruction = p.Instruction
				}
				arm := p.Armed && !p.Deleted && c.Actor().Type == core.ActorHuman
				if arm && !r.Armed {
					r.ArmedAt = c.At()
				}
				r.Armed = arm
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
			f := &Firing{CmdID: c.ID(), Seq: c.Seq(), Slot: p.Slot.UTC(), Outcome: p.Outcome, Missed: p.Missed, Reason: p.Reason,
				At: c.At(), Epoch: r.Epoch, RunID: RunIDFor(c.ID(), c.At())}
			if f.Outcome == "" {
				f.Outcome = OutcomeFired
			}
			r.Firings = append(r.Firings, f)
			byCmd[c.ID()] = f
			byRun[f.RunID] = f
			if f.Outcome != OutcomeManual {
				r.fired[f.Slot.UnixNano()] = true
				if f.Slot.After(r.Cursor) {
					r.Cursor = f.Slot
				}
			}
		case core.KindMessagePosted:
			if f := byCmd[c.Cause()]; f != nil && c.Run() == "" {
				f.Delivered = true
				if p, err := core.Decode[*core.MessagePosted](c); err == nil {
					f.Answer = p.Text
					f.Stats.OutputChars = utf8.RuneCountInString(p.Text)
				}
			} else if f := byRun[c.Run()]; f != nil && c.Scope().Thread == "" {
				if p, err := core.Decode[*core.MessagePosted](c); err == nil && p.Role == core.RoleAnswer {
					f.Delivered = true
				}
			}
		default:
			if f := byRun[c.Run()]; f != nil && c.Run() != "" {
				foldRun(f, c)
			}
		}
	}
	return out
}

// foldRun folds one command of a firing's run into it.
func foldRun(f *Firing, c core.Command) {
	switch c.Kind() {
	case core.KindRunStarted:
		f.Started, f.RunStatus, f.runAt = true, RunRunning, c.At()
	case core.KindRunCompleted:
		f.RunStatus, f.Stats.Duration = RunDone, c.At().Sub(f.runAt)
	case core.KindRunFailed:
		f.RunStatus, f.Stats.Duration = RunFailed, c.At().Sub(f.runAt)
	case core.KindRunPaused:
		if p, err := core.Decode[*core.RunPaused](c); err == nil {
			f.RunStatus = string(p.Status)
		}
	case core.KindApprovalResolved:
		if f.RunStatus != RunDone && f.RunStatus != RunFailed {
			f.RunStatus = RunRunning // the park was decided: it goes on
		}
	case core.KindModelStep:
		if p, err := core.Decode[*core.ModelStep](c); err == nil && p.Final {
			f.Answer = p.Text
			f.Stats.OutputChars = utf8.RuneCountInString(p.Text)
		}
	case core.KindToolRequested:
		if p, err := core.Decode[*core.ToolRequested](c); err == nil && len(p.AutoRecall) == 0 {
			f.Stats.ToolCalls++
			f.Tools = append(f.Tools, p.Call.Name)
		}
	case core.KindToolCompleted:
		if p, err := core.Decode[*core.ToolCompleted](c); err == nil && !p.OK {
			f.Stats.ToolErrors++
		}
	}
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
