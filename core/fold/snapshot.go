package fold

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/marlowe-bot/marlowe/core"
)

// Snapshots: the fold of a channel as it stood after a seq, encoded so a
// load restores it and folds only what follows (a fold.checkpoint command
// carries one). The encoding is the explicit struct below, one field per
// fold field, so a field added to Channel without a line here shows up as
// a difference in TestSnapshotRoundTrip's Dump comparison rather than
// silently lost. Restoring the snapshot taken after seq N and folding
// commands N+1.. gives the same fold as folding 1.. (exact, Dump-equal).

// SnapshotFormat is the snapshot encoding version. A loader given another
// format ignores the checkpoint and folds the whole channel; raising it
// needs no upcaster, old checkpoints just stop being used.
const SnapshotFormat = 4

type snapshot struct {
	Format       int                              `json:"format"`
	Channel      core.ChannelKey                  `json:"channel"`
	Last         uint64                           `json:"last"`
	Head         string                           `json:"head"`
	Counts       map[string]int                   `json:"counts"`
	Policy       core.Policy                      `json:"policy"`
	PolicySet    bool                             `json:"policy_set,omitempty"`
	Consents     map[string]*Grant                `json:"consents"`
	Revoked      map[string]bool                  `json:"revoked,omitempty"`
	Approvals    map[string]*Approval             `json:"approvals"`
	Runs         map[string]runSnap               `json:"runs"`
	Ended        []string                         `json:"ended,omitempty"`
	Live         []string                         `json:"live"`
	Threads      map[string]string                `json:"threads"`
	Seen         fifoSnap                         `json:"seen"`
	DayTokens    map[string]int                   `json:"day_tokens"`
	DayUsage     map[string]map[string]core.Usage `json:"day_usage"`
	History      map[string][]turn                `json:"history"`
	HistoryOrder []string                         `json:"history_order"`
	ThreadConv   fifoSnap                         `json:"thread_conv"`
	MsgConv      fifoSnap                         `json:"msg_conv"`
	Top          topExchange                      `json:"top"`
	Memories     map[string]*MemoryState          `json:"memories"`
	Routines     map[string]routineSnap           `json:"routines"`
	Reports      reportSnap                       `json:"reports"`
	Erasures     map[string]*Erasure              `json:"erasures"`
	Posted       int                              `json:"posted"`
	Redacted     []uint64                         `json:"redacted,omitempty"`
	Attempted    fifoSnap                         `json:"attempted"`
}

type fifoSnap struct {
	M     map[string]string `json:"m"`
	Order []string          `json:"order"`
}

// runSnap is a Run; its steering commands are named by seq (the loader
// reads them back from the chain) rather than copied.
type runSnap struct {
	ID           string         `json:"id"`
	Thread       string         `json:"thread"`
	Status       core.RunStatus `json:"status"`
	Steer        []uint64       `json:"steer,omitempty"`
	EndNotice    string         `json:"end_notice,omitempty"`
	Requester    core.Person    `json:"requester"`
	StartedAt    time.Time      `json:"started_at"`
	Conversation string         `json:"conversation"`
	Trigger      string         `json:"trigger"`
	Steps        int            `json:"steps"`
	Tokens       int            `json:"tokens"`
	Reason       string         `json:"reason,omitempty"`
	UpdatedAt    time.Time      `json:"updated_at"`
}

// routineSnap is a Routine (its exported fields and firings) plus what
// the fold keeps unexported: the slots fired and each firing's run start.
type routineSnap struct {
	Routine *Routine             `json:"routine"`
	Fired   []int64              `json:"fired"`
	RunAt   map[string]time.Time `json:"run_at,omitempty"` // by firing command id
}

type reportSnap struct {
	ByID  map[string]*Report `json:"by_id"`
	ByCmd map[string]string  `json:"by_cmd"`
	Order []string           `json:"order"`
	Filed []string           `json:"filed"`
}

// Snapshot encodes the fold. It copies nothing it does not need to: the
// encoding is made while the caller holds the fold's lock.
func (f *Channel) Snapshot() ([]byte, error) {
	s := snapshot{
		Format: SnapshotFormat, Channel: f.ch, Last: f.last, Counts: f.counts, Policy: f.policy, PolicySet: f.policySet,
		Consents: f.consents, Revoked: f.revokedConsents, Approvals: f.approvals, Runs: make(map[string]runSnap, len(f.runs)), Ended: f.ended,
		Live: slices.Sorted(maps.Keys(f.live)), Threads: f.threads, Seen: fifoSnap{f.seen.M, f.seen.Order}, DayTokens: f.dayTokens, DayUsage: f.dayUsage,
		History: f.history, HistoryOrder: f.historyOrder,
		ThreadConv: fifoSnap{f.threadConv.M, f.threadConv.Order}, MsgConv: fifoSnap{f.msgConv.M, f.msgConv.Order},
		Top: f.top, Memories: f.memories, Routines: make(map[string]routineSnap, len(f.routines)),
		Reports:  reportSnap{ByID: f.reports.byID, ByCmd: f.reports.byCmd, Order: f.reports.order, Filed: slices.Sorted(maps.Keys(f.reports.filed))},
		Erasures: f.erasures, Posted: f.posted, Redacted: f.redacted,
		Attempted: fifoSnap{f.attempted.M, f.attempted.Order},
	}
	if f.last > 0 {
		s.Head = f.head.String()
	}
	for id, r := range f.runs {
		rs := runSnap{ID: r.ID, Thread: r.Thread, Status: r.Status, EndNotice: r.EndNotice, Requester: r.Requester,
			StartedAt: r.StartedAt, Conversation: r.Conversation, Trigger: r.trigger, Steps: r.steps, Tokens: r.tokens,
			Reason: r.reason, UpdatedAt: r.updatedAt}
		for _, c := range r.Steer {
			rs.Steer = append(rs.Steer, c.Seq())
		}
		s.Runs[id] = rs
	}
	for id, r := range f.routines {
		rs := routineSnap{Routine: r, Fired: slices.Sorted(maps.Keys(r.fired))}
		for _, fr := range r.Firings {
			if !fr.runAt.IsZero() {
				if rs.RunAt == nil {
					rs.RunAt = map[string]time.Time{}
				}
				rs.RunAt[fr.CmdID] = fr.runAt
			}
		}
		s.Routines[id] = rs
	}
	b, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("snapshot fold of %s: %w", f.ch, err)
	}
	return b, nil
}

// SnapshotSteer lists the seqs of the steering commands a snapshot names,
// which RestoreChannel needs given back (read from the channel's chain).
func SnapshotSteer(data []byte) ([]uint64, error) {
	var s struct {
		Runs map[string]struct {
			Steer []uint64 `json:"steer"`
		} `json:"runs"`
	}
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("read snapshot steering: %w", err)
	}
	var out []uint64
	for _, r := range s.Runs {
		out = append(out, r.Steer...)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// RestoreChannel decodes a snapshot of ch's fold. steer holds the commands
// named by SnapshotSteer, by seq; a redacted one is left out, as Apply
// leaves out a redacted message.
func RestoreChannel(ch core.ChannelKey, data []byte, steer map[uint64]core.Command) (Channel, error) {
	var s snapshot
	if err := json.Unmarshal(data, &s); err != nil {
		return Channel{}, fmt.Errorf("restore fold of %s: %w", ch, err)
	}
	if s.Format != SnapshotFormat {
		return Channel{}, fmt.Errorf("restore fold of %s: snapshot format %d, want %d", ch, s.Format, SnapshotFormat)
	}
	if s.Channel != ch {
		return Channel{}, fmt.Errorf("restore fold of %s: snapshot is of %s", ch, s.Channel)
	}
	head, err := core.ParseHash(s.Head)
	if err != nil {
		return Channel{}, fmt.Errorf("restore fold of %s: %w", ch, err)
	}
	f := NewChannel(ch)
	f.last, f.head, f.policy, f.policySet, f.top, f.posted = s.Last, head, s.Policy, s.PolicySet, s.Top, s.Posted
	f.revokedConsents, f.historyOrder, f.redacted = s.Revoked, s.HistoryOrder, s.Redacted
	fill(f.counts, s.Counts)
	fill(f.consents, s.Consents)
	fill(f.approvals, s.Approvals)
	f.indexApprovals()
	f.ended = s.Ended
	fill(f.threads, s.Threads)
	fill(f.dayTokens, s.DayTokens)
	fill(f.dayUsage, s.DayUsage)
	fill(f.history, s.History)
	for conv, h := range f.history {
		for _, t := range h {
			f.turnConv[t.Seq] = conv
		}
	}
	fill(f.memories, s.Memories)
	fill(f.erasures, s.Erasures)
	fill(f.reports.byID, s.Reports.ByID)
	fill(f.reports.byCmd, s.Reports.ByCmd)
	f.reports.order = s.Reports.Order
	for _, id := range s.Reports.Filed {
		f.reports.filed[id] = struct{}{}
	}
	for _, id := range s.Live {
		f.live[id] = struct{}{}
	}
	restoreFIFO(&f.seen, s.Seen)
	restoreFIFO(&f.threadConv, s.ThreadConv)
	restoreFIFO(&f.msgConv, s.MsgConv)
	restoreFIFO(&f.attempted, s.Attempted)
	for id, rs := range s.Runs {
		r := &Run{ID: rs.ID, Thread: rs.Thread, Status: rs.Status, EndNotice: rs.EndNotice, Requester: rs.Requester,
			StartedAt: rs.StartedAt, Conversation: rs.Conversation, trigger: rs.Trigger, steps: rs.Steps, tokens: rs.Tokens,
			reason: rs.Reason, updatedAt: rs.UpdatedAt}
		for _, seq := range rs.Steer {
			c, ok := steer[seq]
			if !ok {
				return Channel{}, fmt.Errorf("restore fold of %s: run %s: steering command seq %d not given", ch, id, seq)
			}
			if c.Seq() != seq || c.Channel() != ch {
				return Channel{}, fmt.Errorf("restore fold of %s: run %s: steering command seq %d is %s/%d", ch, id, seq, c.Channel(), c.Seq())
			}
			if !c.Redacted() {
				r.Steer = append(r.Steer, c)
			}
		}
		f.runs[id] = r
	}
	for id, rs := range s.Routines {
		r := rs.Routine
		if r == nil {
			return Channel{}, fmt.Errorf("restore fold of %s: routine %s has no state", ch, id)
		}
		r.fired = make(map[int64]bool, len(rs.Fired))
		for _, slot := range rs.Fired {
			r.fired[slot] = true
		}
		for _, fr := range r.Firings {
			fr.runAt = rs.RunAt[fr.CmdID]
			// firings and firingRuns alias the routine's own firings.
			f.firings[fr.CmdID] = fr
			f.firingRuns[fr.RunID] = fr
		}
		f.routines[id] = r
	}
	return f, nil
}

// fill copies src into dst (a map NewChannel made), so a snapshot's null
// map leaves the fold's empty one, as folding nothing would.
func fill[K comparable, V any](dst, src map[K]V) { maps.Copy(dst, src) }

func restoreFIFO(dst *fifoMap, s fifoSnap) {
	maps.Copy(dst.M, s.M)
	dst.Order = s.Order
}
