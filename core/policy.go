package core

import (
	"fmt"
	"time"
)

// RunStatus is the closed set of run states.
type RunStatus string

const (
	RunQueued          RunStatus = "queued"
	RunWorking         RunStatus = "working"
	RunWaitingApproval RunStatus = "waiting-approval"
	RunNeedsPermission RunStatus = "needs-permission"
	RunBlocked         RunStatus = "blocked"
	RunBroken          RunStatus = "broken"
	RunCancelled       RunStatus = "cancelled"
	RunDone            RunStatus = "done"
)

// RunStatuses lists every status.
func RunStatuses() []RunStatus {
	return []RunStatus{RunQueued, RunWorking, RunWaitingApproval, RunNeedsPermission, RunBlocked, RunBroken, RunCancelled, RunDone}
}

// Terminal reports whether a run in this status will not continue by itself.
func (s RunStatus) Terminal() bool {
	switch s {
	case RunDone, RunBroken, RunCancelled:
		return true
	case RunQueued, RunWorking, RunWaitingApproval, RunNeedsPermission, RunBlocked:
		return false
	}
	panic(fmt.Sprintf("core: unhandled run status %q", string(s)))
}

// Consequence is how far a tool's effect reaches; the gate keys on it.
type Consequence string

const (
	Read         Consequence = "read"
	Write        Consequence = "write"
	Send         Consequence = "send"
	Irreversible Consequence = "irreversible"
)

func (c Consequence) Valid() bool {
	switch c {
	case Read, Write, Send, Irreversible:
		return true
	}
	return false
}

// Default intent window lengths (ARCHITECTURE.md section 5).
const (
	DefaultThreadWindow   = 20 * time.Minute
	DefaultToplevelWindow = 6 * time.Minute
)

// Policy is a channel's admin-set rules. The zero value means defaults.
type Policy struct {
	Tools            []string      `json:"tools,omitempty"`             // exposed tools; empty = defaults
	ApprovalLevels   []Consequence `json:"approval_levels,omitempty"`   // levels that need approval
	Approvers        []string      `json:"approvers,omitempty"`         // user ids allowed to approve
	Admins           []string      `json:"admins,omitempty"`            // user ids allowed to change policy
	ThreadWindowS    int           `json:"thread_window_s,omitempty"`   // 0 = default
	ToplevelWindowS  int           `json:"toplevel_window_s,omitempty"` // 0 = default
	DailyTokenBudget int           `json:"daily_token_budget,omitempty"`
	LinkedChannels   []ChannelKey  `json:"linked_channels,omitempty"` // memory cross-reads, admin only
	// Pins holds, per connector tool, the definition (core.ToolOrigin's
	// hash) the channel first used or an admin last accepted: a tool whose
	// server now declares another is withheld until an admin accepts it.
	Pins map[string]string `json:"pins,omitempty"`
	// ConnectorsOff are the connector servers turned off in this channel
	// (`policy set connector github off`): their tools are not offered.
	ConnectorsOff []string `json:"connectors_off,omitempty"`
	// Consequences overrides a connector tool's consequence in this
	// channel (`policy set consequence github__create_issue send`).
	Consequences map[string]Consequence `json:"consequences,omitempty"`
}

// ThreadWindow returns the effective thread window length.
func (p Policy) ThreadWindow() time.Duration {
	if p.ThreadWindowS > 0 {
		return time.Duration(p.ThreadWindowS) * time.Second
	}
	return DefaultThreadWindow
}

// ToplevelWindow returns the effective top-level window length.
func (p Policy) ToplevelWindow() time.Duration {
	if p.ToplevelWindowS > 0 {
		return time.Duration(p.ToplevelWindowS) * time.Second
	}
	return DefaultToplevelWindow
}
