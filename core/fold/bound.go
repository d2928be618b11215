package fold

import (
	"slices"

	"github.com/marlowe-bot/marlowe/core"
)

// Finished runs leave the fold. A run that ended (with its end notice, if
// any, posted) is kept until Bounds.FinishedRuns newer runs have ended; then it,
// its thread's pointer to it and its decided approvals are dropped. What
// they said stays in the journal: `bot replay` and the exports read it
// there. Live runs, runs owing an end notice and pending approvals are
// never dropped, so the engine's drive, cancel and card paths (which only
// act on those) see no difference.
//
// Bounds holds these caps and the others a channel's fold keeps to
// (channel.go): production folds with DefaultBounds; a test folds with
// smaller ones to reach every cap in a short history.
type Bounds struct {
	FinishedRuns   int // ended runs kept (they are dropped in batches, at twice this)
	SeenMessages   int // delivered message ids kept for redelivery dedupe
	TokenDays      int // days of token use kept
	RedactedListed int // redacted seqs listed (the count stays exact)
}

// DefaultBounds are the caps every production fold keeps to.
func DefaultBounds() Bounds {
	return Bounds{FinishedRuns: 1024, SeenMessages: seenMessages, TokenDays: tokenDays, RedactedListed: redactedListed}
}

// NewChannelBounded is NewChannel with caps b.
func NewChannelBounded(ch core.ChannelKey, b Bounds) Channel {
	f := NewChannel(ch)
	f.bounds, f.seen = b, newFIFOMap(b.SeenMessages)
	return f
}

// runEnded records that run id has ended and owes nothing more, and drops
// the oldest ended runs past the bound.
func (f *Channel) runEnded(id string) {
	r := f.runs[id]
	if r == nil || !finished(r.Status) || r.EndNotice != "" {
		return
	}
	f.ended = append(f.ended, id)
	if len(f.ended) <= 2*f.bounds.FinishedRuns {
		return
	}
	drop := f.ended[:len(f.ended)-f.bounds.FinishedRuns]
	for _, old := range drop {
		f.dropRun(old)
	}
	f.ended = slices.Clone(f.ended[len(drop):])
}

// dropRun removes an ended run, unless it came back to life or owes its
// end notice again.
func (f *Channel) dropRun(id string) {
	r := f.runs[id]
	if r == nil || !finished(r.Status) || r.EndNotice != "" {
		return
	}
	if _, live := f.live[id]; live {
		return
	}
	for _, aid := range f.runApprovals[id] {
		if a := f.approvals[aid]; a != nil && !a.Pending() {
			delete(f.approvals, aid)
		}
	}
	delete(f.runApprovals, id)
	if f.threads[r.Thread] == id {
		delete(f.threads, r.Thread)
	}
	delete(f.runs, id)
}

// indexApprovals rebuilds runApprovals from approvals (after a restore).
func (f *Channel) indexApprovals() {
	for id, a := range f.approvals {
		f.runApprovals[a.Run] = append(f.runApprovals[a.Run], id)
	}
	for _, ids := range f.runApprovals {
		slices.Sort(ids)
	}
}

// finished is Status.Terminal for the statuses a run ends in, false for
// any other (a journaled run.failed names its status; one this build does
// not know keeps the run).
func finished(s core.RunStatus) bool {
	return s == core.RunDone || s == core.RunBroken || s == core.RunCancelled
}
