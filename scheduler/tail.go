package scheduler

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/fold"
)

// A pass reads each channel's tail, not its journal: the scheduler keeps,
// per channel, what it has folded so far (chanTail) and reads only the
// commands after it. The cache is derived from the journal alone, so what
// another replica or an earlier process appended is read like anything
// else; a restart (or a new lease holder) reads each channel once and then
// its tail. A tick with nothing new reads nothing but the tails' emptiness,
// whatever the journals' length (BenchmarkSchedulerTick).

// tailPage bounds one tail read.
const tailPage = 4096

// chanTail is what the scheduler has folded of one channel.
type chanTail struct {
	last uint64 // seq read up to
	// rebuild: a command.redacted was read; the cache may hold what it
	// destroyed (an answer, an approval's summary), so it is read again.
	rebuild bool
	// fold holds the channel's routines; it is fed only the commands that
	// bear on them (routine.*, their firings' runs and posts). nil until a
	// routine.created is read.
	fold     *fold.Channel
	firings  map[string]bool // routine.fired command ids
	runs     map[string]bool // the firings' run ids
	approval map[string]*approvalMark
}

// approvalMark is an approval.requested and, once read, its first
// resolution: what a digest's "waiting for people" needs of the journal
// before its window.
type approvalMark struct {
	req        core.Command
	resolved   uint64 // seq of the first approval.resolved (0: pending)
	resolvedAt time.Time
}

// routineKinds are the kinds the routine fold reads by themselves.
func routineKind(k core.Kind) bool {
	return k == core.KindRoutineCreated || k == core.KindRoutineChanged || k == core.KindRoutineFired
}

func (t *chanTail) apply(ch core.ChannelKey, c core.Command) error {
	t.last = c.Seq()
	if c.Kind() == core.KindCommandRedacted {
		t.rebuild = true
	}
	if c.Redacted() {
		return nil // the folds skip what a redaction destroyed
	}
	switch c.Kind() {
	case core.KindApprovalRequested:
		if p, err := core.Decode[*core.ApprovalRequested](c); err == nil {
			if t.approval == nil {
				t.approval = map[string]*approvalMark{}
			}
			t.approval[p.ApprovalID] = &approvalMark{req: c}
		}
	case core.KindApprovalResolved:
		if p, err := core.Decode[*core.ApprovalResolved](c); err == nil {
			if m := t.approval[p.ApprovalID]; m != nil && m.resolved == 0 {
				m.resolved, m.resolvedAt = c.Seq(), c.At()
			}
		}
	}
	relevant := routineKind(c.Kind()) || t.runs[c.Run()] && c.Run() != "" ||
		c.Kind() == core.KindMessagePosted && t.firings[c.Cause()]
	if !relevant {
		return nil
	}
	if t.fold == nil {
		if c.Kind() != core.KindRoutineCreated {
			return nil
		}
		f := fold.NewChannel(ch)
		t.fold, t.firings, t.runs = &f, map[string]bool{}, map[string]bool{}
	}
	if c.Kind() == core.KindRoutineFired {
		t.firings[c.ID()] = true
		t.runs[RunIDFor(c.ID(), c.At())] = true
	}
	if err := t.fold.Apply(c); err != nil {
		return fmt.Errorf("fold routines of %s: %w", ch, err)
	}
	return nil
}

// prune forgets approvals resolved long before any firing whose digest can
// still be compiled (a firing is performed again only within the grace
// window), so the cache holds about the pending ones.
func (t *chanTail) prune(before time.Time) {
	for id, m := range t.approval {
		if m.resolved != 0 && m.resolvedAt.Before(before) {
			delete(t.approval, id)
		}
	}
}

// catchUp reads ch's commands after what the scheduler has folded of it.
// Callers hold s.mu.
func (s *Scheduler) catchUp(ctx context.Context, ch core.ChannelKey) (*chanTail, error) {
	t := s.tails[ch]
	if t == nil || t.rebuild {
		t = &chanTail{}
		s.tails[ch] = t
	}
	for {
		cmds, err := s.cfg.Journal.Read(ctx, ch, t.last+1, tailPage)
		if err != nil {
			return nil, fmt.Errorf("routine pass %s: read from %d: %w", ch, t.last+1, err)
		}
		for _, c := range cmds {
			if err := t.apply(ch, c); err != nil {
				delete(s.tails, ch)
				return nil, err
			}
		}
		if len(cmds) < tailPage {
			break
		}
	}
	t.prune(s.cfg.Clock().Add(-2*s.cfg.Grace - s.retryAfter()))
	return t, nil
}

// routinesOf returns ch's routines as of its tail, each a copy a pass may
// change (fire appends to Firings, perform marks one delivered) without
// touching the cache: the journal, read back, is what changes the cache.
func (t *chanTail) routinesOf() map[string]*Routine {
	out := map[string]*Routine{}
	if t.fold == nil {
		return out
	}
	for id, r := range t.fold.RoutinesByID() {
		c := *r
		c.Firings = make([]*Firing, len(r.Firings))
		for i, f := range r.Firings {
			g := *f
			c.Firings[i] = &g
		}
		out[id] = &c
	}
	return out
}

// digestSince is where f's digest starts: after r's last successful firing
// before f, or its creation.
func digestSince(r *Routine, f *Firing) (uint64, time.Time) {
	since, sinceAt := r.CreatedSeq, r.CreatedAt
	for _, g := range r.Firings {
		if g.Seq < f.Seq && g.Succeeded() {
			since, sinceAt = g.Seq, g.At
		}
	}
	return since, sinceAt
}

// digestInput is what Digest needs to compile f's digest, read from the
// tail instead of the whole channel: the approvals requested up to since
// and not resolved before f (Digest lists pending ones whenever asked),
// the commands up to since of the runs that finished in the window (their
// request and answer), and the window itself, the commands after since and
// before f. Digest gives the same text from it as from every command
// before f (TestTailDigestMatchesTheWholeJournal).
func (s *Scheduler) digestInput(ctx context.Context, t *chanTail, ch core.ChannelKey, since, upto uint64) ([]core.Command, error) {
	var window []core.Command
	if upto > since+1 {
		var err error
		if window, err = s.cfg.Journal.Read(ctx, ch, since+1, int(upto-since-1)); err != nil {
			return nil, fmt.Errorf("routine digest %s: read from %d: %w", ch, since+1, err)
		}
	}
	var early []core.Command
	seen := map[uint64]bool{}
	add := func(c core.Command) {
		if !seen[c.Seq()] {
			seen[c.Seq()] = true
			early = append(early, c)
		}
	}
	for _, m := range t.approval {
		if m.req.Seq() <= since && (m.resolved == 0 || m.resolved >= upto) {
			add(m.req)
		}
	}
	runs := map[string]bool{}
	for _, c := range window {
		if k := c.Kind(); (k == core.KindRunCompleted || k == core.KindRunFailed) && c.Run() != "" && !runs[c.Run()] {
			runs[c.Run()] = true
			cmds, err := s.cfg.Journal.ReadRun(ctx, c.Run())
			if err != nil {
				return nil, fmt.Errorf("routine digest %s: read run %s: %w", ch, c.Run(), err)
			}
			for _, rc := range cmds {
				if rc.Channel() == ch && rc.Seq() <= since {
					add(rc)
				}
			}
		}
	}
	slices.SortFunc(early, func(a, b core.Command) int { return cmp.Compare(a.Seq(), b.Seq()) })
	return append(early, window...), nil
}

// digestText is f's digest compiled from cmds (Digest's input for f).
func digestText(r *Routine, f *Firing, cmds []core.Command) string {
	since, sinceAt := digestSince(r, f)
	text := Digest(r, cmds, since, sinceAt, f.At)
	if f.Missed > 0 {
		text += fmt.Sprintf("\n_(%d earlier slot(s) were missed while the bot was down.)_", f.Missed)
	}
	return text
}

// tailDigest is f's digest, read from ch's tail.
func (s *Scheduler) tailDigest(ctx context.Context, t *chanTail, r *Routine, f *Firing) (string, error) {
	since, _ := digestSince(r, f)
	cmds, err := s.digestInput(ctx, t, r.Scope.Key(), since, f.Seq)
	if err != nil {
		return "", err
	}
	return digestText(r, f, cmds), nil
}
