package fold

import (
	"time"
	"unicode/utf8"

	"github.com/marlowe-bot/marlowe/core"
)

// Outcomes of routine.fired ("" in records before outcomes means fired).
const (
	OutcomeFired   = "fired"
	OutcomeSkipped = "skipped"
	OutcomeManual  = "manual"
)

// Routine is one routine as the channel's fold keeps it: what the
// scheduler fires from, `routines` lists and a proposal card's click
// decides. This is the only fold of routine commands (the scheduler reads
// it through Routines).
type Routine struct {
	ID       string
	Scope    core.Scope // the channel, at top level
	Owner    string
	Spec, TZ string
	// Schedule is the schedule as its person typed it ("" when they typed
	// the spec, or before it was kept): `routines` shows it.
	Schedule    string
	Instruction string
	Armed       bool
	Deleted     bool
	CreatedAt   time.Time
	CreatedSeq  uint64
	// CreatedID is the routine.created command's id (a proposal card's
	// tokens name it); Proposed says it was created disarmed (a routine the
	// model proposed), and Decided that a routine.changed has followed.
	CreatedID string
	Proposed  bool
	Decided   bool
	// CreatedCause is the command that caused routine.created (for a
	// proposal, the tool call whose card shows it); DecidedBy and
	// DecidedAt are the first routine.changed's actor and time.
	CreatedCause string
	DecidedBy    string
	DecidedAt    time.Time
	DecidedArm   bool // the first routine.changed armed it
	// ProposedIn is where the proposal's card was shown (the run's thread).
	ProposedIn core.Scope
	// ArmedAt is when a person last armed it (created armed, resumed, or a
	// proposal's Arm click): slots before it never fire.
	ArmedAt time.Time
	// RescheduledAt is when an edit last changed its spec or zone: slots
	// of the new schedule before it never fire (nor count as missed).
	RescheduledAt time.Time
	// Epoch is the seq of the command that last set the routine's spec,
	// zone or instruction (its creation or an edit): firings after it
	// settle a new drift anchor, and the anchor before it is kept.
	Epoch uint64
	// Cursor is the latest scheduled slot decided (fired or skipped): no
	// slot at or before it is considered again.
	Cursor time.Time
	// Firings by command id, in journal order.
	Firings []*Firing
	fired   map[int64]bool // scheduled slots (unix nanos) already journaled
}

// Firing is one routine.fired command, its run (with a model) and whether
// its post arrived. Run status and delivery are separate: a run can finish
// and its post still fail.
type Firing struct {
	CmdID   string
	Seq     uint64
	Slot    time.Time
	Outcome string
	Missed  int
	Reason  string
	// Coalesced: a skipped slot a later catch-up firing covers.
	Coalesced bool
	At        time.Time
	Delivered bool
	// Epoch is the routine's epoch when it fired.
	Epoch uint64
	// RunID is the id its unattended run has (or will have) when a model
	// answers: fixed by the firing, so a slot never starts two runs.
	RunID string
	// Started: run.started is journaled. RunStatus is "" (none),
	// FiringRunning, FiringDone, FiringFailed or the paused status.
	Started   bool
	RunStatus string
	// Answer is the run's final text (the digest text without a model).
	Answer string
	Tools  []string
	Stats  FiringStats
	runAt  time.Time
}

// FiringStats are what drift is judged on.
type FiringStats struct {
	OutputChars int // the answer's size before any cap
	Duration    time.Duration
	ToolCalls   int
	ToolErrors  int
}

// Run statuses of a firing.
const (
	FiringRunning = "running"
	FiringDone    = "done"
	FiringFailed  = "failed"
)

// maxFiringAnswer bounds the answer text a firing keeps (the next
// firing's run-history block quotes less than this), so a routine's long
// outputs do not pile up in a cached channel.
const maxFiringAnswer = 2000

// keepRunes cuts s to at most n runes.
func keepRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n])
}

// Succeeded reports whether the firing did its work and its post arrived.
func (f *Firing) Succeeded() bool {
	return f.Outcome != OutcomeSkipped && f.Delivered && (!f.Started || f.RunStatus == FiringDone)
}

// RoutineRunID is the run id of the firing journaled as cmdID at at.
func RoutineRunID(cmdID string, at time.Time) string { return core.KeyedID("routine-run:"+cmdID, at) }

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

// Routines folds one channel's commands (all of them, or those since a
// routine's creation) and returns its routines by id.
func Routines(ch core.ChannelKey, cmds []core.Command) (map[string]*Routine, error) {
	f := NewChannel(ch)
	for _, c := range cmds {
		if err := f.Apply(c); err != nil {
			return nil, err
		}
	}
	return f.routines, nil
}

func (f *Channel) createRoutine(c core.Command, p *core.RoutineCreated) {
	sc := c.Scope()
	sc.Thread = ""
	// Only a person arms a routine: a routine.created from anyone else (a
	// run's schedule_routine call) is a proposal, disarmed whatever it says.
	armed := p.Armed && c.Actor().Type == core.ActorHuman
	r := &Routine{ID: p.RoutineID, Scope: sc, Owner: p.Owner, Spec: p.Cron, TZ: p.TZ, Schedule: p.Schedule,
		Instruction: p.Instruction, Armed: armed, CreatedAt: c.At(), CreatedSeq: c.Seq(), Epoch: c.Seq(), fired: map[int64]bool{},
		CreatedID: c.ID(), Proposed: !armed, ProposedIn: c.Scope(), CreatedCause: c.Cause()}
	if armed {
		r.ArmedAt = c.At()
	}
	f.routines[p.RoutineID] = r
}

func (f *Channel) changeRoutine(c core.Command, p *core.RoutineChanged) {
	r := f.routines[p.RoutineID]
	if r == nil {
		return
	}
	if p.Cron != "" || p.TZ != "" || p.Instruction != "" {
		r.Epoch = c.Seq() // an edit re-settles the drift anchor
	}
	if p.Cron != "" || p.TZ != "" {
		r.RescheduledAt = c.At()
	}
	if p.Cron != "" {
		r.Spec, r.Schedule = p.Cron, p.Schedule
	}
	if p.TZ != "" {
		r.TZ = p.TZ
	}
	if p.Instruction != "" {
		r.Instruction = p.Instruction
	}
	arm := p.Armed && !p.Deleted && c.Actor().Type == core.ActorHuman // only a person arms
	if r.Proposed && r.ArmedAt.IsZero() && c.Actor().ID != r.Owner {
		arm = false // a proposal is first armed by its requester alone
	}
	if arm && !r.Armed {
		r.ArmedAt = c.At()
	}
	r.Armed = arm
	r.Deleted = r.Deleted || p.Deleted
	if !r.Decided {
		r.DecidedBy, r.DecidedAt, r.DecidedArm = c.Actor().ID, c.At(), r.Armed
	}
	r.Decided = true
}

func (f *Channel) fireRoutine(c core.Command, p *core.RoutineFired) {
	r := f.routines[p.RoutineID]
	if r == nil {
		return
	}
	fr := &Firing{CmdID: c.ID(), Seq: c.Seq(), Slot: p.Slot.UTC(), Outcome: p.Outcome, Missed: p.Missed, Reason: p.Reason,
		Coalesced: p.Coalesced && p.Outcome == OutcomeSkipped, At: c.At(), Epoch: r.Epoch, RunID: RoutineRunID(c.ID(), c.At())}
	if fr.Outcome == "" {
		fr.Outcome = OutcomeFired
	}
	r.Firings = append(r.Firings, fr)
	f.firings[c.ID()] = fr
	f.firingRuns[fr.RunID] = fr
	if fr.Outcome != OutcomeManual {
		r.fired[fr.Slot.UnixNano()] = true
		if fr.Slot.After(r.Cursor) {
			r.Cursor = fr.Slot
		}
	}
}

// routinePosted marks a firing delivered: its digest (posted by no run,
// naming the firing as cause) or its run's answer at the channel's top
// level.
func (f *Channel) routinePosted(c core.Command, p *core.MessagePosted) {
	if fr := f.firings[c.Cause()]; fr != nil && c.Run() == "" {
		fr.Delivered, fr.Answer, fr.Stats.OutputChars = true, keepRunes(p.Text, maxFiringAnswer), utf8.RuneCountInString(p.Text)
	} else if fr := f.firingRuns[c.Run()]; fr != nil && c.Run() != "" && c.Scope().Thread == "" && p.Role == core.RoleAnswer {
		fr.Delivered = true
	}
}

// firingRun folds a command of a firing's run into the firing: its status,
// duration, answer and tool use (what drift is judged on).
func (f *Channel) firingRun(c core.Command, p core.Payload) {
	fr := f.firingRuns[c.Run()]
	if fr == nil || c.Run() == "" {
		return
	}
	switch p := p.(type) {
	case *core.RunStarted:
		fr.Started, fr.RunStatus, fr.runAt = true, FiringRunning, c.At()
	case *core.RunCompleted:
		fr.RunStatus, fr.Stats.Duration = FiringDone, c.At().Sub(fr.runAt)
	case *core.RunFailed:
		fr.RunStatus, fr.Stats.Duration = FiringFailed, c.At().Sub(fr.runAt)
	case *core.RunPaused:
		fr.RunStatus = string(p.Status)
	case *core.ApprovalResolved:
		if fr.RunStatus != FiringDone && fr.RunStatus != FiringFailed {
			fr.RunStatus = FiringRunning // the park was decided: it goes on
		}
	case *core.ModelStep:
		if p.Final {
			fr.Answer, fr.Stats.OutputChars = keepRunes(p.Text, maxFiringAnswer), utf8.RuneCountInString(p.Text)
		}
	case *core.ToolRequested:
		if len(p.AutoRecall) == 0 {
			fr.Stats.ToolCalls++
			fr.Tools = append(fr.Tools, p.Call.Name)
		}
	case *core.ToolCompleted:
		if !p.OK {
			fr.Stats.ToolErrors++
		}
	}
}

// routineState is r as `bot replay` shows it.
func routineState(r *Routine) *RoutineState {
	s := &RoutineState{ID: r.ID, Cron: r.Spec, TZ: r.TZ, Instruction: r.Instruction, Owner: r.Owner, Armed: r.Armed, Deleted: r.Deleted}
	for _, fr := range r.Firings {
		if fr.Outcome != OutcomeSkipped {
			s.Fired++
		}
		if fr.Slot.After(s.LastSlot) {
			s.LastSlot = fr.Slot
		}
	}
	return s
}
