package core

import "time"

// Outcomes of routine.fired ("" in records before outcomes means fired).
const (
	OutcomeFired   = "fired"
	OutcomeSkipped = "skipped"
	OutcomeManual  = "manual"
)

// Routine is one routine as the channel's fold keeps it: what the
// scheduler fires from and the routines command lists.
type Routine struct {
	ID          string
	Scope       Scope // the channel, at top level
	Owner       string
	Spec, TZ    string
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
	ProposedIn Scope
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

// Routines folds one channel's commands and returns its routines by id.
func Routines(ch ChannelKey, cmds []Command) (map[string]*Routine, error) {
	f := newChannelFold(ch)
	for _, c := range cmds {
		if err := f.apply(c); err != nil {
			return nil, err
		}
	}
	return f.routines, nil
}

func (f *channelFold) createRoutine(c Command, p *RoutineCreated) {
	sc := c.Scope()
	sc.Thread = ""
	// Only a person arms a routine: a routine.created from anyone else (a
	// run's schedule_routine call) is a proposal, disarmed whatever it says.
	armed := p.Armed && c.Actor().Type == ActorHuman
	f.routines[p.RoutineID] = &Routine{ID: p.RoutineID, Scope: sc, Owner: p.Owner, Spec: p.Cron, TZ: p.TZ,
		Instruction: p.Instruction, Armed: armed, CreatedAt: c.At(), CreatedSeq: c.Seq(), fired: map[int64]bool{},
		CreatedID: c.ID(), Proposed: !armed, ProposedIn: c.Scope(), CreatedCause: c.Cause()}
}

func (f *channelFold) changeRoutine(c Command, p *RoutineChanged) {
	r := f.routines[p.RoutineID]
	if r == nil {
		return
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
	r.Armed = p.Armed && !p.Deleted && c.Actor().Type == ActorHuman // only a person arms
	r.Deleted = r.Deleted || p.Deleted
	if !r.Decided {
		r.DecidedBy, r.DecidedAt, r.DecidedArm = c.Actor().ID, c.At(), r.Armed
	}
	r.Decided = true
}

func (f *channelFold) fireRoutine(c Command, p *RoutineFired) {
	r := f.routines[p.RoutineID]
	if r == nil {
		return
	}
	fr := &Firing{CmdID: c.ID(), Seq: c.Seq(), Slot: p.Slot.UTC(), Outcome: p.Outcome, Missed: p.Missed, At: c.At()}
	if fr.Outcome == "" {
		fr.Outcome = OutcomeFired
	}
	r.Firings = append(r.Firings, fr)
	f.firings[c.ID()] = fr
	if fr.Outcome != OutcomeManual {
		r.fired[fr.Slot.UnixNano()] = true
		if fr.Slot.After(r.Cursor) {
			r.Cursor = fr.Slot
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
