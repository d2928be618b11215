package fold

import (
	"encoding/json"
	"fmt"
	"iter"
	"maps"
	"slices"
	"time"

	"github.com/marlowe-bot/marlowe/core"
)

// Read accessors. The fold's maps stay unexported so that only Apply
// changes them; readers get single entries or iterators. Entries are
// pointers into the fold: callers read them under the same lock they hold
// for Apply and never write through them.

// Key is the channel this fold is of.
func (f *Channel) Key() core.ChannelKey { return f.ch }

// Seq is the sequence number of the last command folded (0: none).
func (f *Channel) Seq() uint64 { return f.last }

// Head is the hash of the last command folded (zero: none).
func (f *Channel) Head() core.Hash { return f.head }

// Policy is the channel's policy and whether one was ever set.
func (f *Channel) Policy() (core.Policy, bool) { return f.policy, f.policySet }

// Grant is the standing consent with id, or nil.
func (f *Channel) Grant(id string) *Grant { return f.consents[id] }

// Grants lists the standing consents by id.
func (f *Channel) Grants() iter.Seq2[string, *Grant] { return maps.All(f.consents) }

// Revoked reports whether the consent with id was revoked.
func (f *Channel) Revoked(id string) bool { return f.revokedConsents[id] }

// Approval is the approval with id, or nil.
func (f *Channel) Approval(id string) *Approval { return f.approvals[id] }

// Approvals lists every approval the channel asked for, by id.
func (f *Channel) Approvals() iter.Seq2[string, *Approval] { return maps.All(f.approvals) }

// Run is the run with id, or nil.
func (f *Channel) Run(id string) *Run { return f.runs[id] }

// Runs lists every run the channel had, by id.
func (f *Channel) Runs() iter.Seq2[string, *Run] { return maps.All(f.runs) }

// LiveRuns lists the ids of the runs not yet ended.
func (f *Channel) LiveRuns() iter.Seq[string] { return maps.Keys(f.live) }

// ThreadRun is the latest run started in thread.
func (f *Channel) ThreadRun(thread string) (string, bool) {
	id, ok := f.threads[thread]
	return id, ok
}

// Delivered reports whether a message with this platform id was journaled
// (redelivery dedupe).
func (f *Channel) Delivered(messageID string) bool {
	_, ok := f.seen.M[messageID]
	return ok
}

// TokensOn is the tokens the channel's runs spent on t's UTC date.
func (f *Channel) TokensOn(t time.Time) int { return f.dayTokens[dayKey(t)] }

// UsageOn is the tokens the channel's runs spent on t's UTC date, by model
// (a copy), for spend estimates.
func (f *Channel) UsageOn(t time.Time) map[string]core.Usage {
	return maps.Clone(f.dayUsage[dayKey(t)])
}

// History is a conversation's recent turns, oldest first, within
// ConversationTurns and ConversationTokens, each naming its command (Seq).
// A turn's Text is what this fold folded, or "" in a fold restored from a
// checkpoint (snapshots keep references only): TurnText reads it from the
// command.
func (f *Channel) History(conv string) []core.ThreadTurn {
	h := f.history[conv]
	if len(h) == 0 {
		return nil
	}
	out := make([]core.ThreadTurn, len(h))
	for i, t := range h {
		out[i] = core.ThreadTurn{Seq: t.Seq, Author: t.Author, Bot: t.Bot, Text: t.Text}
	}
	return out
}

// TurnRefs lists the seqs of every conversation turn the fold keeps, in
// order: the commands a run may be given as history.
func (f *Channel) TurnRefs() []uint64 {
	return slices.Sorted(maps.Keys(f.turnConv))
}

// RoutinesByID iterates the channel's routines (deleted ones included).
func (f *Channel) RoutinesByID() iter.Seq2[string, *Routine] { return maps.All(f.routines) }

// Routine is the routine with id, or nil.
func (f *Channel) Routine(id string) *Routine { return f.routines[id] }

// Report is the owner's report filed under key, or nil (only the latest
// reports are kept; ReportKnown knows every key).
func (f *Channel) Report(key string) *Report { return f.reports.byID[key] }

// ReportFiledAs is the key of the report its report.filed command cmdID
// filed, or "".
func (f *Channel) ReportFiledAs(cmdID string) string { return f.reports.byCmd[cmdID] }

// ReportKnown reports whether a report with key was ever filed.
func (f *Channel) ReportKnown(key string) bool { return f.reports.Known(key) }

// Reports lists the kept reports by key.
func (f *Channel) Reports() iter.Seq2[string, *Report] { return maps.All(f.reports.byID) }

// Dump renders the fold for comparison: state is its exported view (what
// `bot replay` prints), internal the fields only the engine reads. Two folds
// of the same commands dump alike (the random-history test compares the
// engine's live fold with a fresh one this way).
func (f *Channel) Dump() (state, internal string, err error) {
	st, err := json.Marshal(f.State())
	if err != nil {
		return "", "", fmt.Errorf("dump state: %w", err)
	}
	type runDump struct {
		Thread    string
		Status    core.RunStatus
		Steer     []uint64
		EndNotice string
		Requester core.Person
		StartedAt string
		Conv      string
	}
	runs := map[string]runDump{}
	for id, r := range f.runs {
		d := runDump{Thread: r.Thread, Status: r.Status, EndNotice: r.EndNotice, Requester: r.Requester, StartedAt: r.StartedAt.UTC().String(), Conv: r.Conversation}
		for _, c := range r.Steer {
			d.Steer = append(d.Steer, c.Seq())
		}
		runs[id] = d
	}
	seen := slices.Sorted(maps.Keys(f.seen.M))
	eng, err := json.Marshal(struct {
		PolicySet    bool
		Consents     map[string]*Grant
		Revoked      map[string]bool
		Approvals    map[string]*Approval
		Runs         map[string]runDump
		Ended        []string
		Threads      map[string]string
		Seen         []string
		DayTokens    map[string]int
		DayUsage     map[string]map[string]core.Usage
		History      map[string][]turn
		HistoryOrder []string
		ThreadConv   fifoMap
		MsgConv      fifoMap
		Top          topExchange
		Routines     map[string]*Routine
		Attempted    fifoMap
	}{f.policySet, f.consents, f.revokedConsents, f.approvals, runs, f.ended, f.threads, seen, f.dayTokens, f.dayUsage, f.history, f.historyOrder,
		f.threadConv, f.msgConv, f.top, f.routines, f.attempted})
	if err != nil {
		return "", "", fmt.Errorf("dump internal fields: %w", err)
	}
	return string(st), string(eng), nil
}
