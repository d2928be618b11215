package engine

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/marlowe-bot/marlowe/core"
)

// Retention (MARLOWE_RETENTION, docs/privacy.md): a pass redacts, channel by
// channel, every command of an erasable kind (messages, model steps, tool
// requests and results, posts, recorded history: core.ErasableKinds()) older
// than the limit, each with a signed command.redacted by the system actor
// "retention". Decision records and memories are kept. A pass is bounded
// (max redactions) and idempotent: redacted commands are skipped, so a
// pass that stops halfway, or runs twice, leaves the same journal. The
// caller runs passes on one replica at a time (an elected lease).

// RetentionPass is what one pass did.
type RetentionPass struct {
	// Redacted counts the commands redacted, by kind.
	Redacted map[string]int
	// Channels is how many channels had something redacted.
	Channels int
	// More is set when the pass stopped at its bound with work left.
	More bool
}

// Retain runs one retention pass: commands older than now minus limit,
// at most max of them (max <= 0: no bound).
func (e *Engine) Retain(ctx context.Context, limit time.Duration, max int) (RetentionPass, error) {
	out := RetentionPass{Redacted: map[string]int{}}
	if limit <= 0 {
		return out, fmt.Errorf("retention: limit %s is not positive", limit)
	}
	cutoff := e.now().Add(-limit)
	chs, err := e.j.Channels(ctx)
	if err != nil {
		return out, fmt.Errorf("retention: list channels: %w", err)
	}
	reason := "retention: older than " + limit.String()
	for _, ch := range chs {
		budget := -1
		if max > 0 {
			budget = max - total(out.Redacted)
			if budget == 0 {
				out.More = true
				break
			}
		}
		n, more, err := e.retainChannel(ctx, ch, cutoff, budget, reason, out.Redacted)
		if err != nil {
			return out, err
		}
		if n > 0 {
			out.Channels++
			// A loaded fold drops the turns it copied from what this pass
			// redacted as it folds the redactions: catch it up now (other
			// replicas' do at their next read of the channel). Checkpoints
			// hold turns by reference only, so they stay usable.
			if err := e.catchUpLoaded(ctx, ch); err != nil {
				return out, fmt.Errorf("retention: %w", err)
			}
		}
		if more {
			out.More = true
			break
		}
	}
	return out, nil
}

func total(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// retainChannel redacts ch's erasable commands older than cutoff, up to
// budget (< 0: no bound), counting them in counts. It reads from the
// channel's retention cursor: everything at or below it is older than an
// earlier cutoff and handled already (a cache: a restart reads from 1).
func (e *Engine) retainChannel(ctx context.Context, ch core.ChannelKey, cutoff time.Time, budget int, reason string, counts map[string]int) (int, bool, error) {
	sc, err := core.ParseChannelKey(string(ch))
	if err != nil {
		return 0, false, fmt.Errorf("retention: %w", err)
	}
	from := e.cursor(ch) + 1
	done := from - 1
	// The channel's latest checkpoint is what its next load restores: it
	// holds no conversation text (turns by reference), so retention keeps
	// it however old it is, and redacts the older ones.
	var keep uint64
	if lr, ok := e.j.(core.LatestReader); ok {
		c, found, err := lr.LatestOfKind(ctx, ch, core.KindFoldCheckpoint)
		if err != nil {
			return 0, false, fmt.Errorf("retention: find the checkpoint of %s: %w", ch, err)
		}
		if found {
			keep = c.Seq()
		}
	}
	defer func() { e.advance(ch, done) }()
	const page = 512
	n := 0
	for {
		cmds, err := e.j.Read(ctx, ch, from, page)
		if err != nil {
			return n, false, fmt.Errorf("retention: read %s from %d: %w", ch, from, err)
		}
		for _, c := range cmds {
			// Commands are appended in time order; the first newer one
			// ends the pass in this channel (a later pass goes on).
			if !c.At().Before(cutoff) {
				return n, false, nil
			}
			if core.Erasable(c.Kind()) && !c.Redacted() && c.Seq() != keep {
				if budget >= 0 && n >= budget {
					return n, true, nil
				}
				rd, err := e.b.System("retention", sc, core.Meta{Cause: c.ID()},
					&core.CommandRedacted{Seq: c.Seq(), ID: c.ID(), Reason: reason, TargetKind: c.Kind().String()})
				if err != nil {
					return n, false, err
				}
				if _, err := e.j.Redact(ctx, c.Seq(), rd); err != nil {
					// Another pass (another replica without the lease, say)
					// redacted it first: the store refuses a second one.
					if cur, rerr := e.j.Read(ctx, ch, c.Seq(), 1); rerr == nil && len(cur) == 1 && cur[0].Redacted() {
						done = c.Seq()
						continue
					}
					return n, false, fmt.Errorf("retention: redact %s seq %d: %w", ch, c.Seq(), err)
				}
				counts[c.Kind().String()]++
				n++
			}
			done = c.Seq()
		}
		if len(cmds) < page {
			return n, false, nil
		}
		from = cmds[len(cmds)-1].Seq() + 1
	}
}

// catchUpLoaded folds what the journal holds past ch's view, when this
// process has the channel loaded (a view not loaded folds it at its load).
func (e *Engine) catchUpLoaded(ctx context.Context, ch core.ChannelKey) error {
	e.chMu.Lock()
	v := e.channels[ch]
	e.chMu.Unlock()
	if v == nil {
		return nil
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if !v.loaded {
		return nil
	}
	return v.catchUp(ctx)
}

// retainCursors is, per channel, the seq up to which a retention pass has
// handled everything: a cache of this process (a restart reads from 1).
type retainCursors struct {
	retainMu sync.Mutex
	retained map[core.ChannelKey]uint64
}

func (r *retainCursors) cursor(ch core.ChannelKey) uint64 {
	r.retainMu.Lock()
	defer r.retainMu.Unlock()
	return r.retained[ch]
}

func (r *retainCursors) advance(ch core.ChannelKey, seq uint64) {
	r.retainMu.Lock()
	defer r.retainMu.Unlock()
	if r.retained == nil {
		r.retained = map[core.ChannelKey]uint64{}
	}
	r.retained[ch] = max(r.retained[ch], seq)
}
