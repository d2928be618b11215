package fold

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/marlowe-bot/marlowe/core"
)

// Channel is the one fold of a channel's journal: every derived fact
// about a channel (policy, consents, approvals, runs, memories, routines,
// token use, delivered message ids, thread history) comes from apply. The
// engine's cache (chanView) holds one and advances it with each append;
// Fold builds one from a whole journal for `bot replay`. One switch means
// the engine and the replay cannot disagree about what a command means.
type Channel struct {
	ch        core.ChannelKey
	last      uint64 // seq of the last command folded
	head      core.Hash
	counts    map[string]int // commands by kind, redacted ones included
	policy    core.Policy
	policySet bool
	consents  map[string]*Grant // by consent id (see consent.go)
	// revokedConsents are the ids of revoked grants (a repeated revoke says so).
	revokedConsents map[string]bool
	approvals       map[string]*Approval
	runApprovals    map[string][]string // run id → its approvals' ids (dropRun)
	runs            map[string]*Run
	// ended lists finished runs in the order they ended, to bound runs
	// (bound.go).
	ended []string
	// live holds the runs not yet ended, so the owner finds what to drive
	// without walking every run the channel ever had.
	live      map[string]struct{}
	threads   map[string]string // thread root → latest run id
	bounds    Bounds
	seen      fifoMap                          // delivered message ids (redelivery dedupe), the latest bounds.SeenMessages
	dayTokens map[string]int                   // UTC date → tokens spent, the latest tokenDays days
	dayUsage  map[string]map[string]core.Usage // UTC date → model → tokens (spend estimates), the days of dayTokens
	// history keeps each conversation's recent turns (routed messages and
	// the bot's answers) so a new run knows what came before; threadConv,
	// msgConv and top say which conversation a message continues
	// (conversation.go).
	history      map[string][]turn
	historyOrder []string          // conversations in first-seen order, to bound the map
	turnConv     map[uint64]string // a kept turn's seq → its conversation (forgetSeq)
	threadConv   fifoMap           // thread root → its conversation, when not itself
	msgConv      fifoMap           // message id (routed or posted) → its conversation
	top          topExchange
	memories     map[string]*MemoryState
	routines     map[string]*Routine
	firings      map[string]*Firing  // by routine.fired command id: its digest post names it as cause
	firingRuns   map[string]*Firing  // by the firing's run id
	reports      reportFold          // routine owners' reports (report.go)
	erasures     map[string]*Erasure // `forget me` requests asked in this DM (erasure.go)
	posted       int
	redacted     []uint64 // seqs named by command.redacted, in journal order
	// attempted holds the part keys of recent message.attempted records: a
	// resumed post of one of them may be a second copy (core.AttemptedPoster).
	attempted fifoMap
}

func NewChannel(ch core.ChannelKey) Channel {
	return Channel{
		ch: ch, counts: map[string]int{}, consents: map[string]*Grant{}, approvals: map[string]*Approval{},
		runApprovals: map[string][]string{}, runs: map[string]*Run{}, live: map[string]struct{}{}, threads: map[string]string{}, seen: newFIFOMap(seenMessages),
		dayTokens: map[string]int{}, dayUsage: map[string]map[string]core.Usage{}, history: map[string][]turn{}, turnConv: map[uint64]string{},
		threadConv: newFIFOMap(conversationThreads), msgConv: newFIFOMap(conversationMessages),
		memories: map[string]*MemoryState{}, routines: map[string]*Routine{}, firings: map[string]*Firing{},
		firingRuns: map[string]*Firing{},
		reports:    newReportFold(),
		erasures:   map[string]*Erasure{},
		attempted:  newFIFOMap(attemptedKeys),
		bounds:     DefaultBounds(),
	}
}

// Bounds of the per-channel maps that would otherwise grow with the
// channel's age: the delivered message ids kept for redelivery dedupe
// (platforms redeliver within minutes or hours, never after this many
// newer messages), the days of token use kept (only today's is read), and
// the redacted seqs listed (the count stays exact in counts).
const (
	seenMessages   = 16384
	tokenDays      = 62
	redactedListed = 4096
)

// attemptedKeys bounds the send attempts a channel remembers. A post's
// attempts matter only until its message.posted, normally moments later;
// the bound covers every post a crash can leave unrecorded.
const attemptedKeys = 4096

// Attempted reports whether a send of part key was recorded as attempted.
func (f *Channel) Attempted(key string) bool {
	_, ok := f.attempted.M[key]
	return ok
}

// Run is a run as the channel sees it.
type Run struct {
	ID     string
	Thread string
	Status core.RunStatus
	// steer holds the run's message.received commands while it is live:
	// the driver picks up any it has not seen before each model call.
	Steer []core.Command
	// endNotice is the effect id of a failed run's notice until it is
	// recorded as posted: Start re-drives such runs to post it.
	EndNotice string
	// requester is the author of the message that started the run (empty
	// for unattended runs); startedAt its run.started time. The chat
	// commands use them: who may cancel, who added a memory, what runs.
	Requester core.Person
	StartedAt time.Time
	// Conversation is the conversation the run's trigger joined (its thread
	// for runs without a trigger message): where its answers are remembered.
	Conversation string
	// What `bot replay` shows besides: the trigger message id, model steps
	// and their tokens, why it paused or ended, its latest lifecycle time.
	trigger   string
	steps     int
	tokens    int
	reason    string
	updatedAt time.Time
}

// remember adds the turn the command at seq makes to a conversation's
// history, within its bounds.
func (f *Channel) remember(conv string, seq uint64, author core.Person, bot bool, text string) {
	text = cutTurn(text)
	h, ok := f.history[conv]
	if !ok {
		f.historyOrder = append(f.historyOrder, conv)
		if len(f.historyOrder) > historyMaxThreads {
			for _, t := range f.history[f.historyOrder[0]] {
				delete(f.turnConv, t.Seq)
			}
			delete(f.history, f.historyOrder[0])
			f.historyOrder = f.historyOrder[1:]
		}
	}
	f.turnConv[seq] = conv
	f.history[conv] = f.boundTurns(append(h, turn{Seq: seq, Author: author, Bot: bot, Size: len(text), Text: text}))
}

func (f *Channel) runOrNew(id string) *Run {
	r := f.runs[id]
	if r == nil {
		r = &Run{ID: id, Status: core.RunQueued}
		f.runs[id] = r
	}
	return r
}

// touch is run for a lifecycle command of c's run: it notes when.
func (f *Channel) touch(c core.Command) *Run {
	r := f.runOrNew(c.Run())
	r.updatedAt = c.At()
	return r
}

// dayKey is the UTC date a token spend counts on.
func dayKey(t time.Time) string { return t.UTC().Format(time.DateOnly) }

// Apply folds one command. Every kind must have a case: an unhandled kind
// is an error, and TestEveryKindIsHandled applies each kind to catch a gap.
// A chanView calls it under its lock.
func (f *Channel) Apply(c core.Command) error {
	if c.Channel() != f.ch {
		return fmt.Errorf("fold channel %s: command of channel %s", f.ch, c.Channel())
	}
	f.last, f.head = c.Seq(), c.Hash()
	f.counts[c.Kind().String()]++
	if c.Redacted() && !c.Restated() {
		return nil // a privacy deletion: the envelope counts, the content is gone
	}
	p, err := c.Payload()
	if err != nil {
		return fmt.Errorf("fold channel %s: %w", f.ch, err)
	}
	f.firingRun(c, p)
	switch p := p.(type) {
	case *core.MessageReceived:
		f.seen.set(p.MessageID, "")
		thread := c.Scope().Thread
		if thread == "" && p.Visibility != core.DM {
			thread = p.MessageID // a top-level message is answered in a thread under it
		}
		conv := f.joined(c.Seq(), p, thread)
		if c.Run() != "" {
			r := f.runOrNew(c.Run())
			if r.Requester.ID == "" && r.StartedAt.IsZero() {
				// the trigger: journaled before run.started
				r.Requester, r.Conversation = p.Author, conv
			}
			if !r.Status.Terminal() {
				r.Steer = append(r.Steer, c)
			}
		}
	case *core.RunStarted:
		r := f.touch(c)
		r.Thread, r.Status, r.StartedAt, r.trigger = c.Scope().Thread, core.RunWorking, c.At(), p.Trigger
		if r.Conversation == "" {
			r.Conversation = f.ConversationOfThread(r.Thread)
		}
		f.threads[r.Thread] = r.ID
		f.live[r.ID] = struct{}{}
	case *core.ModelStep:
		day := dayKey(c.At())
		f.dayTokens[day] += p.Usage.InputTokens + p.Usage.OutputTokens
		if p.Usage != (core.Usage{}) {
			if f.dayUsage[day] == nil {
				f.dayUsage[day] = map[string]core.Usage{}
			}
			u := f.dayUsage[day][p.Model]
			u.InputTokens += p.Usage.InputTokens
			u.OutputTokens += p.Usage.OutputTokens
			f.dayUsage[day][p.Model] = u
		}
		if len(f.dayTokens) > f.bounds.TokenDays {
			oldest := slices.Min(slices.Collect(maps.Keys(f.dayTokens)))
			delete(f.dayTokens, oldest)
			delete(f.dayUsage, oldest)
		}
		if c.Run() != "" {
			r := f.touch(c)
			r.steps++
			r.tokens += p.Usage.InputTokens + p.Usage.OutputTokens
		}
	case *core.ApprovalRequested:
		f.touch(c).Status = core.RunWaitingApproval
		if f.approvals[p.ApprovalID] == nil {
			f.runApprovals[c.Run()] = append(f.runApprovals[c.Run()], p.ApprovalID)
		}
		f.approvals[p.ApprovalID] = &Approval{
			ID: p.ApprovalID, Run: c.Run(), Scope: c.Scope(), CallID: p.CallID, Tool: p.Tool,
			Consequence: core.Consequence(p.Consequence), Requester: p.Requester, Question: p.Question,
			Options: p.Options, Destination: p.Destination, ExpiresAt: p.ExpiresAt,
			Notify: p.Notify, Unattended: p.Unattended, InDM: p.InDM, SignIn: p.SignIn, RequestedAt: c.At(), Summary: p.Summary, Reason: p.Reason, Pin: p.Pin, InDoubt: p.InDoubt,
		}
	case *core.ApprovalResolved:
		// The first resolution stands: a late click or expiry after it
		// changes nothing. A decided card hands the run back to the loop
		// once none of its other cards is pending.
		if a := f.approvals[p.ApprovalID]; a != nil && a.Pending() {
			a.Decision, a.By, a.At = p.Decision, p.By, c.At()
			if r := f.runs[a.Run]; r != nil && (r.Status == core.RunWaitingApproval || r.Status == core.RunNeedsPermission) && !f.hasPending(a.Run) {
				r.Status = core.RunWorking
			}
		}
	case *core.ConsentGranted:
		f.grantConsent(c, p)
	case *core.ConsentRevoked:
		f.revokeConsent(p)
	case *core.RunPaused:
		r := f.touch(c)
		r.Status, r.reason = p.Status, p.Reason
	case *core.RunCompleted:
		r := f.touch(c)
		r.Status, r.Steer = core.RunDone, nil
		delete(f.live, r.ID)
		f.runEnded(r.ID)
	case *core.RunFailed:
		r := f.touch(c)
		r.Status, r.reason, r.Steer = p.Status, p.Cause, nil
		delete(f.live, r.ID)
		if p.Status == core.RunBroken || p.Status == core.RunCancelled && p.Cause != CauseSuperseded {
			r.EndNotice = core.EffectID(f.ch, c.Seq(), 0)
		}
		f.runEnded(r.ID)
	case *core.PolicyChanged:
		f.policy, f.policySet = p.Policy, true
	case *core.MessagePosted:
		f.posted++
		if r := f.runs[c.Run()]; r != nil && r.EndNotice == p.EffectID {
			r.EndNotice = ""
			f.runEnded(r.ID)
		}
		f.answered(c, p)
		f.routinePosted(c, p)
	case *core.MessageAttempted:
		f.attempted.set(p.EffectID, "")
	case *core.MemoryWritten:
		f.memories[p.MemoryID] = &MemoryState{ID: p.MemoryID, Text: p.Text}
	case *core.MemoryForgotten:
		if m := f.memories[p.MemoryID]; m != nil {
			m.Forgotten = true
		}
	case *core.MemoryRedacted:
		// Deleted for good: nothing of it is left to show, so it leaves
		// the fold rather than staying as a marker.
		delete(f.memories, p.MemoryID)
	case *core.RoutineCreated:
		f.createRoutine(c, p)
	case *core.RoutineChanged:
		f.changeRoutine(c, p)
	case *core.RoutineFired:
		f.fireRoutine(c, p)
	case *core.CommandRedacted:
		f.redacted = append(f.redacted, p.Seq)
		if len(f.redacted) > 2*f.bounds.RedactedListed {
			f.redacted = slices.Clone(f.redacted[len(f.redacted)-f.bounds.RedactedListed:])
		}
		f.forgetSeq(p.Seq)
	case *core.ReportFiled:
		f.reports.file(c, p)
	case *core.ReportDismissed:
		f.reports.dismiss(c, p)
	case *core.ErasureRequested:
		f.requestErasure(c, p)
	case *core.ErasureResolved:
		f.resolveErasure(c, p)
	case *core.FoldCheckpoint:
		// A snapshot of the state this fold already holds (snapshot.go):
		// counted, nothing to change.
	case *core.ConnectionChanged:
		// Audit of a person's sign-ins: the vault holds the state.
	case *core.CardClicked, *core.ToolRequested, *core.PermissionDecided, *core.ToolCompleted, *core.MessageUpdated:
		// Observations: counted; their effects arrive as their own commands
		// (approval.resolved, tool results live in the run's fold).
	default:
		return fmt.Errorf("fold channel %s: unhandled kind %s", f.ch, c.Kind())
	}
	return nil
}

func (f *Channel) hasPending(run string) bool {
	for _, a := range f.approvals {
		if a.Run == run && a.Pending() {
			return true
		}
	}
	return false
}

// RunState is a run as `bot replay` shows it.
type RunState struct {
	ID        string         `json:"id"`
	Thread    string         `json:"thread"`
	Status    core.RunStatus `json:"status"`
	Trigger   string         `json:"trigger"`
	Steps     int            `json:"steps"`
	Tokens    int            `json:"tokens"`
	Reason    string         `json:"reason,omitempty"`
	StartedAt time.Time      `json:"started_at"`
	UpdatedAt time.Time      `json:"updated_at"`
}

// ApprovalState is an approval as `bot replay` shows it.
type ApprovalState struct {
	ID        string    `json:"id"`
	Run       string    `json:"run"`
	Tool      string    `json:"tool"`
	Decision  string    `json:"decision"` // pending | approved | declined | expired | superseded | answered
	By        string    `json:"by,omitempty"`
	ExpiresAt time.Time `json:"expires_at"`
}

// ConsentState is one standing consent grant as `bot replay` shows it: the
// id `consent revoke` takes and what it covers.
type ConsentState struct {
	ID          string    `json:"id"`
	Tool        string    `json:"tool"`
	Destination string    `json:"destination,omitempty"`
	Owner       string    `json:"owner"`
	At          time.Time `json:"at"`
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

// ChannelState is the exported view of a channel's fold: what `bot replay`
// prints. It is a copy, derived from the same fold the engine keeps.
type ChannelState struct {
	Channel   core.ChannelKey           `json:"channel"`
	Seq       uint64                    `json:"seq"`
	Head      string                    `json:"head"`
	Counts    map[string]int            `json:"counts"`
	Policy    core.Policy               `json:"policy"`
	Runs      map[string]*RunState      `json:"runs"`
	Approvals map[string]*ApprovalState `json:"approvals"`
	Memories  map[string]*MemoryState   `json:"memories"`
	Routines  map[string]*RoutineState  `json:"routines"`
	Consents  []ConsentState            `json:"consents"` // standing grants, oldest first
	Posted    int                       `json:"posted"`
	Redacted  []uint64                  `json:"redacted,omitempty"`
}

// Fold folds one channel's commands, in order, and returns its state.
func Fold(ch core.ChannelKey, cmds []core.Command) (*ChannelState, error) {
	f := NewChannel(ch)
	for _, c := range cmds {
		if err := f.Apply(c); err != nil {
			return f.State(), err
		}
	}
	return f.State(), nil
}

// State copies the fold into its exported view.
func (f *Channel) State() *ChannelState {
	s := &ChannelState{
		Channel: f.ch, Seq: f.last, Counts: make(map[string]int, len(f.counts)), Policy: f.policy,
		Runs: make(map[string]*RunState, len(f.runs)), Approvals: make(map[string]*ApprovalState, len(f.approvals)),
		Memories: make(map[string]*MemoryState, len(f.memories)), Routines: make(map[string]*RoutineState, len(f.routines)),
		Consents: make([]ConsentState, 0, len(f.consents)), Posted: f.posted, Redacted: slices.Clone(f.redacted[max(0, len(f.redacted)-f.bounds.RedactedListed):]),
	}
	if f.last > 0 {
		s.Head = f.head.String()
	}
	for k, n := range f.counts {
		s.Counts[k] = n
	}
	for id, r := range f.runs {
		s.Runs[id] = &RunState{ID: r.ID, Thread: r.Thread, Status: r.Status, Trigger: r.trigger, Steps: r.steps,
			Tokens: r.tokens, Reason: r.reason, StartedAt: r.StartedAt, UpdatedAt: r.updatedAt}
	}
	for id, a := range f.approvals {
		d := a.Decision
		if a.Pending() {
			d = "pending"
		}
		s.Approvals[id] = &ApprovalState{ID: a.ID, Run: a.Run, Tool: a.Tool, Decision: d, By: a.By.ID, ExpiresAt: a.ExpiresAt}
	}
	for id, m := range f.memories {
		c := *m
		s.Memories[id] = &c
	}
	for id, r := range f.routines {
		s.Routines[id] = routineState(r)
	}
	for _, g := range f.consents {
		s.Consents = append(s.Consents, ConsentState{ID: g.ID, Tool: g.Tool, Destination: g.Destination, Owner: g.Owner, At: g.At})
	}
	sort.Slice(s.Consents, func(i, j int) bool {
		a, b := s.Consents[i], s.Consents[j]
		if !a.At.Equal(b.At) {
			return a.At.Before(b.At)
		}
		return strings.Compare(a.ID, b.ID) < 0
	})
	return s
}

// CauseSuperseded ends a parked run that a new message in its thread
// replaced; the new run's checklist is all the thread needs to see.
const CauseSuperseded = "superseded by a new message in the thread"
