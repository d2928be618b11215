package core

import (
	"fmt"
	"sort"
	"time"
)

// RunState is a run as folded from its commands.
type RunState struct {
	ID        string    `json:"id"`
	Thread    string    `json:"thread"`
	Status    RunStatus `json:"status"`
	Trigger   string    `json:"trigger"`
	Steps     int       `json:"steps"`
	Tokens    int       `json:"tokens"`
	Reason    string    `json:"reason,omitempty"`
	StartedAt time.Time `json:"started_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// ApprovalState is an approval as folded from its commands.
type ApprovalState struct {
	ID        string    `json:"id"`
	Run       string    `json:"run"`
	Tool      string    `json:"tool"`
	Decision  string    `json:"decision"` // pending | approved | declined | expired
	By        string    `json:"by,omitempty"`
	ExpiresAt time.Time `json:"expires_at"`
}

// MemoryState is one memory as folded from memory.* commands.
type MemoryState struct {
	ID        string `json:"id"`
	Text      string `json:"text,omitempty"`
	Forgotten bool   `json:"forgotten,omitempty"`
	Deleted   bool   `json:"deleted,omitempty"`
}

// RoutineState is a routine as folded from routine.* commands.
type RoutineState struct {
	ID          string    `json:"id"`
	Cron        string    `json:"cron"`
	TZ          string    `json:"tz"`
	Instruction string    `json:"instruction"`
	Owner       string    `json:"owner"`
	Armed       bool      `json:"armed"`
	Fired       int       `json:"fired"`
	LastSlot    time.Time `json:"last_slot,omitempty"`
	Deleted     bool      `json:"deleted,omitempty"`
}

// ChannelState is everything derived from one channel's journal. It is a
// pure fold: the same commands always give the same state.
type ChannelState struct {
	Channel   ChannelKey                `json:"channel"`
	Seq       uint64                    `json:"seq"`
	Head      string                    `json:"head"`
	Counts    map[string]int            `json:"counts"`
	Policy    Policy                    `json:"policy"`
	Runs      map[string]*RunState      `json:"runs"`
	Approvals map[string]*ApprovalState `json:"approvals"`
	Memories  map[string]*MemoryState   `json:"memories"`
	Routines  map[string]*RoutineState  `json:"routines"`
	Consents  []string                  `json:"consents"` // "tool|destination|owner"
	Posted    int                       `json:"posted"`
	Redacted  []uint64                  `json:"redacted,omitempty"`
}

// NewChannelState returns the empty state of ch.
func NewChannelState(ch ChannelKey) *ChannelState {
	return &ChannelState{
		Channel: ch, Counts: map[string]int{}, Runs: map[string]*RunState{},
		Approvals: map[string]*ApprovalState{}, Memories: map[string]*MemoryState{},
		Routines: map[string]*RoutineState{}, Consents: []string{},
	}
}

// Fold applies commands in order.
func Fold(ch ChannelKey, cmds []Command) (*ChannelState, error) {
	s := NewChannelState(ch)
	for _, c := range cmds {
		if err := s.Apply(c); err != nil {
			return s, err
		}
	}
	return s, nil
}

func (s *ChannelState) run(c Command) *RunState {
	r := s.Runs[c.Run()]
	if r == nil {
		r = &RunState{ID: c.Run(), Thread: c.Scope().Thread, Status: RunQueued, StartedAt: c.At()}
		s.Runs[c.Run()] = r
	}
	r.UpdatedAt = c.At()
	return r
}

// Apply folds one command. Every kind must have a case: an unhandled kind is
// an error, and TestEveryKindIsHandled applies each kind to catch a gap.
func (s *ChannelState) Apply(c Command) error {
	if c.Channel() != s.Channel {
		return fmt.Errorf("fold %s: command of channel %s", s.Channel, c.Channel())
	}
	s.Seq = c.Seq()
	s.Head = c.Hash().String()
	s.Counts[c.Kind().String()]++
	if c.Redacted() {
		// The payload is gone; the envelope still counts.
		return nil
	}
	p, err := c.Payload()
	if err != nil {
		return fmt.Errorf("fold: %w", err)
	}
	switch p := p.(type) {
	case *MessageReceived, *CardClicked, *ToolRequested, *PermissionDecided, *ToolCompleted, *MessageUpdated:
		// Observations: counted, no derived state of their own here.
	case *RunStarted:
		r := s.run(c)
		r.Status, r.Trigger = RunWorking, p.Trigger
	case *ModelStep:
		r := s.run(c)
		r.Steps++
		r.Tokens += p.Usage.InputTokens + p.Usage.OutputTokens
	case *ApprovalRequested:
		s.run(c).Status = RunWaitingApproval
		s.Approvals[p.ApprovalID] = &ApprovalState{ID: p.ApprovalID, Run: c.Run(), Tool: p.Tool, Decision: "pending", ExpiresAt: p.ExpiresAt}
	case *ApprovalResolved:
		if a := s.Approvals[p.ApprovalID]; a != nil {
			a.Decision, a.By = p.Decision, p.By.ID
			// A decided card hands the run back to the loop (an expired one
			// ends it with run.failed right after).
			if r := s.Runs[a.Run]; r != nil && (r.Status == RunWaitingApproval || r.Status == RunNeedsPermission) {
				r.Status = RunWorking
			}
		}
	case *ConsentGranted:
		s.Consents = append(s.Consents, p.Tool+"|"+p.Destination+"|"+p.Owner)
		sort.Strings(s.Consents)
	case *ConsentRevoked:
		key := p.Tool + "|" + p.Destination + "|" + p.Owner
		out := s.Consents[:0]
		for _, k := range s.Consents {
			if k != key {
				out = append(out, k)
			}
		}
		s.Consents = out
	case *MessagePosted:
		s.Posted++
	case *MemoryWritten:
		s.Memories[p.MemoryID] = &MemoryState{ID: p.MemoryID, Text: p.Text}
	case *MemoryForgotten:
		if m := s.Memories[p.MemoryID]; m != nil {
			m.Forgotten = true
		}
	case *MemoryRedacted:
		if m := s.Memories[p.MemoryID]; m != nil {
			m.Deleted, m.Forgotten, m.Text = true, true, ""
		}
	case *RoutineCreated:
		s.Routines[p.RoutineID] = &RoutineState{ID: p.RoutineID, Cron: p.Cron, TZ: p.TZ, Instruction: p.Instruction, Owner: p.Owner, Armed: p.Armed}
	case *RoutineChanged:
		if r := s.Routines[p.RoutineID]; r != nil {
			if p.Cron != "" {
				r.Cron = p.Cron
			}
			if p.TZ != "" {
				r.TZ = p.TZ
			}
			if p.Instruction != "" {
				r.Instruction = p.Instruction
			}
			r.Armed = p.Armed
			if p.Deleted {
				r.Deleted, r.Armed = true, false
			}
		}
	case *RoutineFired:
		if r := s.Routines[p.RoutineID]; r != nil {
			if p.Outcome != "skipped" {
				r.Fired++
			}
			if p.Slot.After(r.LastSlot) {
				r.LastSlot = p.Slot
			}
		}
	case *RunPaused:
		r := s.run(c)
		r.Status, r.Reason = p.Status, p.Reason
	case *RunCompleted:
		s.run(c).Status = RunDone
	case *RunFailed:
		r := s.run(c)
		r.Status, r.Reason = p.Status, p.Cause
	case *PolicyChanged:
		s.Policy = p.Policy
	case *CommandRedacted:
		s.Redacted = append(s.Redacted, p.Seq)
	default:
		return fmt.Errorf("fold: unhandled kind %s", c.Kind())
	}
	return nil
}
