package scheduler

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/replica"
)

// errLostSlot: another scheduler journaled this slot's firing first.
var errLostSlot = errors.New("slot fired by another scheduler")

// fire journals routine.fired before anything is posted: the record is
// what makes a slot fire once, across restarts. A scheduled slot's command
// id is keyed by (routine, slot), so a second scheduler's append of the same
// slot is refused by the journal (errLostSlot).
func (s *Scheduler) fire(ctx context.Context, r *Routine, p *core.RoutineFired) (*Firing, error) {
	return s.fireKeyed(ctx, r, p, 0, "", time.Time{})
}

// fireKeyed is fire; a manual firing with a key is journaled under the id
// KeyedID(key, at) (the request that ran it), at head (appendAt).
func (s *Scheduler) fireKeyed(ctx context.Context, r *Routine, p *core.RoutineFired, head uint64, key string, at time.Time) (*Firing, error) {
	var d core.Draft
	var err error
	if p.Outcome == OutcomeManual && key != "" {
		d, err = s.cfg.Boundary.SystemKeyed("scheduler", key, at, r.Scope, core.Meta{}, p)
	} else if p.Outcome == OutcomeManual {
		d, err = s.cfg.Boundary.System("scheduler", r.Scope, core.Meta{}, p)
	} else {
		d, err = s.cfg.Boundary.SystemKeyed("scheduler", "routine.fired:"+r.ID+":"+p.Slot.UTC().Format(time.RFC3339Nano), p.Slot, r.Scope, core.Meta{}, p)
	}
	if err != nil {
		return nil, fmt.Errorf("routine %s: %w", r.ID, err)
	}
	cmds, err := s.appendAt(ctx, head, d)
	if err != nil {
		if p.Outcome != OutcomeManual && s.slotJournaled(ctx, r, p.Slot) {
			s.cfg.Logger.InfoContext(ctx, "routine slot already fired by another scheduler", "routine", r.ID, "slot", p.Slot)
			return nil, errLostSlot
		}
		return nil, fmt.Errorf("routine %s: journal firing: %w", r.ID, err)
	}
	c := cmds[0]
	f := &Firing{CmdID: c.ID(), Seq: c.Seq(), Slot: p.Slot, Outcome: p.Outcome, Missed: p.Missed, Reason: p.Reason,
		Coalesced: p.Coalesced, At: c.At(), Epoch: r.Epoch, RunID: RunIDFor(c.ID(), c.At())}
	r.Firings = append(r.Firings, f)
	s.cfg.Logger.InfoContext(ctx, "routine fired", "routine", r.ID, "slot", p.Slot, "outcome", p.Outcome, "missed", p.Missed, "run", f.RunID)
	return f, nil
}

// appendAt journals d. Inside a drive (a routine command's or a proposal's
// tool call, whose ctx carries the channel's lease fence, replica.WithFence)
// the append is fenced and made at head, the seq of the channel's last
// command the decision was folded from: a deposed replica's call (its lease
// passed to another replica, a run replayed there) appends nothing and gets
// replica.ErrLeaseLost, and a channel that moved on since the fold gets
// core.ErrHeadMoved (the caller decides again). Outside a drive (the
// scheduler's own passes, which need not own the channel) it is a plain
// append: a firing's keyed id is what makes it once.
func (s *Scheduler) appendAt(ctx context.Context, head uint64, d core.Draft) ([]core.Command, error) {
	f := replica.FenceFor(ctx, d.Channel())
	if f == nil {
		return s.cfg.Journal.Append(ctx, d)
	}
	cmds, err := s.cfg.Journal.AppendAt(ctx, core.Expect{Head: head, Fence: f}, d)
	if errors.Is(err, core.ErrFenced) {
		return nil, fmt.Errorf("%w: %w", replica.ErrLeaseLost, err)
	}
	return cmds, err
}

// maxReplans bounds how often a routine command is decided again because
// the channel moved on between its fold and its fenced append.
const maxReplans = 16

// slotJournaled catches up with the channel: is r's slot fired now?
func (s *Scheduler) slotJournaled(ctx context.Context, r *Routine, slot time.Time) bool {
	t, err := s.catchUp(ctx, r.Scope.Key())
	if err != nil || t.fold == nil {
		return false
	}
	now := t.fold.Routine(r.ID)
	return now != nil && now.Fired(slot)
}

// retryAfter is how old an undelivered firing must be before a pass posts
// it again: the scheduler that journaled it may still be posting.
func (s *Scheduler) retryAfter() time.Duration { return 3 * s.cfg.Tick }

// perform does f's work: with a model, starts its unattended run (keyed by
// the firing: a second start is a no-op); without one, posts the digest.
// digest is compiled from the journal before the firing only, so a retry
// posts (or seeds) the same text under the same key. retry says an earlier
// attempt may have posted already.
func (s *Scheduler) perform(ctx context.Context, r *Routine, f *Firing, digest string, retry bool) error {
	if s.eng == nil {
		return errors.New("scheduler: no engine bound")
	}
	if !s.eng.HasModel() {
		if _, err := s.eng.PostRoutine(ctx, core.DigestPost{Scope: r.Scope, Key: "routine:" + r.ID + ":" + f.CmdID,
			Cause: f.CmdID, Text: digest, Retry: retry}); err != nil {
			return fmt.Errorf("routine %s: post digest: %w", r.ID, err)
		}
		f.Delivered = true
		return nil
	}
	owner := core.Person{ID: r.Owner}
	if _, err := s.eng.StartUnattended(ctx, core.UnattendedRun{Scope: r.Scope, Owner: owner,
		Instruction: r.Instruction, Context: seed(r, f, digest), Trigger: "routine:" + r.ID, RunID: f.RunID}); err != nil {
		return fmt.Errorf("routine %s: start run: %w", r.ID, err)
	}
	f.Started = true
	return nil
}

// digestFor compiles f's digest from cmds, the whole channel (a manual
// run's): only the commands before the firing count.
func digestFor(r *Routine, f *Firing, cmds []core.Command) string {
	var before []core.Command
	for _, c := range cmds {
		if c.Seq() < f.Seq {
			before = append(before, c)
		}
	}
	return digestText(r, f, before)
}

// maxHistoryChars bounds what the run-history block quotes of the last
// successful firing's answer.
const maxHistoryChars = 1500

// seed is a model firing's context, carried apart from its instruction
// (the routine's own, the run's only trusted text): the run-history block
// (what the last successful firing did and produced) and the digest data,
// so the run does the task again knowing what it said last time instead of
// starting blind or repeating the task text. All of it is other people's
// messages, the bot's own answers and memory texts: the engine shows it to
// the model as untrusted content, and it names no target for the gate.
func seed(r *Routine, f *Firing, digest string) string {
	var b strings.Builder
	b.WriteString("--- Run history ---\n")
	var last *Firing
	for _, g := range r.Firings {
		if g.Seq < f.Seq && g.Succeeded() {
			last = g
		}
	}
	if last == nil {
		b.WriteString("This is the routine's first successful firing: there is no earlier result.\n")
	} else {
		fmt.Fprintf(&b, "Last successful firing: %s (slot %s).\n", last.At.UTC().Format("2006-01-02 15:04 MST"), last.Slot.UTC().Format("2006-01-02 15:04 MST"))
		if len(last.Tools) > 0 {
			fmt.Fprintf(&b, "It called: %s (%d tool error(s)).\n", strings.Join(last.Tools, ", "), last.Stats.ToolErrors)
		} else {
			b.WriteString("It called no tools.\n")
		}
		answer := last.Answer
		if rs := []rune(answer); len(rs) > maxHistoryChars {
			answer = string(rs[:maxHistoryChars]) + "…"
		}
		fmt.Fprintf(&b, "It posted:\n%s\n", answer)
	}
	b.WriteString("\n--- Channel activity since then (digest data) ---\n")
	b.WriteString(digest)
	return b.String()
}

// overBudget says why a model firing would overdraw the channel's daily
// budget ("" when it would not, or when no model answers).
func (s *Scheduler) overBudget(ctx context.Context, r *Routine) string {
	if s.eng == nil || !s.eng.HasModel() {
		return ""
	}
	spent, limit, err := s.eng.DailyBudget(ctx, r.Scope)
	if err != nil {
		s.cfg.Logger.WarnContext(ctx, "routine budget unreadable; firing anyway", "routine", r.ID, "error", err)
		return ""
	}
	if limit > 0 && spent >= limit {
		return fmt.Sprintf("the channel's daily token budget is used up (%d of %d tokens)", spent, limit)
	}
	return ""
}

// tend looks after r's earlier firings: an undelivered one is performed
// again (after retryAfter, within the grace window) and reported to the
// owner once it is past it; skipped slots are reported; drift is checked.
func (s *Scheduler) tend(ctx context.Context, tail *chanTail, r *Routine, now time.Time) error {
	var errs []error
	for _, f := range r.Firings {
		switch {
		case f.Outcome == OutcomeSkipped:
			errs = append(errs, s.noticeSkip(ctx, r, f))
		case f.Delivered:
		case now.Sub(f.At) > s.cfg.Grace:
			errs = append(errs, s.noticeUndelivered(ctx, r, f))
		case now.Sub(f.At) < s.retryAfter():
		case f.Started && f.RunStatus != RunDone && f.RunStatus != RunFailed:
			// Its run is under way (or parked on its owner): the engine
			// drives it and its post.
		case f.Started:
			// The run ended without its post: nothing to retry here; past
			// the grace window the owner is told.
		default:
			digest, err := s.tailDigest(ctx, tail, r, f)
			if err == nil {
				err = s.perform(ctx, r, f, digest, true)
			}
			if err != nil {
				errs = append(errs, err)
			}
		}
	}
	errs = append(errs, s.checkDrift(ctx, r))
	return errors.Join(errs...)
}
