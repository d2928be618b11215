package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/marlowe-bot/marlowe/core"
)

// Automatic recall: before a model call, the run's new human messages are
// looked up in the channel's memory and the notes journaled as a tool step.

// Bounds on what one automatic recall may put into the journal and the view
// whatever the memory returns; memory/ enforces the real per-turn budget
// (6 snippets of 400 characters by default).
const (
	maxNoteText  = 2000
	maxNotesText = maxObservation
	maxQuery     = 2000
)

// recallNotes is the automatic recall (ARCHITECTURE.md sections 6 and 7).
// The run's human messages that no model call has seen yet, and that have
// no recall journaled, are recalled for once, their texts being the turn's
// queries, when the channel's memory is a TurnRecaller. The notes are
// journaled as the harness's own recall call before the model call that
// sees them: a replay rebuilds the view without asking memory, and a run
// resumed after a crash reuses them instead of asking again. A failing
// memory costs the notes, never the run.
func (d *driver) recallNotes(ctx context.Context) error {
	rs := d.rs
	if hs := rs.unrecalled(); len(hs) > 0 {
		if err := d.recallFor(ctx, hs); err != nil {
			return err
		}
	}
	if rs.notesInjected {
		// The checklist shows the recall before the model call (also after
		// a crash between its record and the edit); a no-op when it does.
		return d.syncChecklist(ctx, rs.Status)
	}
	return nil
}

func (d *driver) recallFor(ctx context.Context, hs []*humanMsg) error {
	rs, e := d.rs, d.e
	if e.cfg.Memory == nil {
		return nil
	}
	tr, ok := e.cfg.Memory(rs.Scope.Key()).(core.TurnRecaller)
	if !ok {
		return nil
	}
	ids := make([]string, 0, len(hs))
	queries := make([]string, 0, len(hs))
	for _, h := range hs {
		ids = append(ids, h.cmdID)
		if q := strings.TrimSpace(h.text); q != "" {
			queries = append(queries, core.Truncate(q, maxQuery))
		}
	}
	if len(queries) == 0 {
		return nil
	}
	key := rs.ID + "/" + ids[len(ids)-1]
	got, cached := e.pendingRecall(key)
	if !cached {
		var err error
		got, err = d.askMemory(ctx, tr, queries)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			e.log.WarnContext(ctx, "automatic recall failed; the run goes on without notes", "run", rs.ID, "error", err)
			return nil
		}
	}
	notes := boundNotes(got.Snippets)
	if len(notes) == 0 {
		return nil // nothing to inject, nothing to record
	}
	// Memory may not hand the same notes to this thread again (its dedup
	// window): keep them until they are journaled, so a drive retried after
	// a failed append injects them still.
	e.keepRecall(key, got)
	args, err := json.Marshal(map[string][]string{"queries": queries})
	if err != nil {
		return err
	}
	call := core.ToolCall{ID: "recall_" + ids[len(ids)-1], Name: "recall", Args: string(args)}
	req, err := d.agent(core.Meta{Cause: ids[len(ids)-1]}, &core.ToolRequested{Call: call, AutoRecall: ids})
	if err != nil {
		return err
	}
	done, err := d.agent(core.Meta{Cause: req.ID()}, &core.ToolCompleted{CallID: call.ID, Tool: call.Name, OK: true,
		Trust: string(core.Untrusted), Notes: notes, Degraded: got.Degraded})
	if err != nil {
		return err
	}
	if _, err := d.appendRun(ctx, nil, req, done); err != nil {
		return err
	}
	e.dropRecall(key)
	e.log.InfoContext(ctx, "recalled notes for the turn", "run", rs.ID, "notes", len(notes), "tokens", got.Tokens, "degraded", got.Degraded)
	return nil
}

// askMemory calls the recaller within the tool timeout, turning a panic
// into an error.
func (d *driver) askMemory(ctx context.Context, tr core.TurnRecaller, queries []string) (got core.TurnRecall, err error) {
	rctx, cancel := context.WithTimeout(ctx, d.e.cfg.ToolTimeout)
	defer cancel()
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("recall panicked: %v", r)
		}
	}()
	return tr.RecallForTurn(rctx, d.rs.Scope.Thread, queries...)
}

// boundNotes drops empty notes and cuts the rest to the bounds above.
func boundNotes(in []core.Recalled) []core.Recalled {
	var out []core.Recalled
	total := 0
	for _, n := range in {
		n.Text = core.Truncate(strings.TrimSpace(n.Text), maxNoteText)
		if n.Text == "" {
			continue
		}
		if total += len(n.ID) + len(n.Text); total > maxNotesText {
			break
		}
		out = append(out, n)
	}
	return out
}

// maxPendingRecalls bounds the recalls kept for a retry: an entry outlives
// its drive only when journaling it failed.
const maxPendingRecalls = 1024

func (e *Engine) pendingRecall(key string) (core.TurnRecall, bool) {
	e.recallMu.Lock()
	defer e.recallMu.Unlock()
	r, ok := e.recalls[key]
	return r, ok
}

func (e *Engine) keepRecall(key string, r core.TurnRecall) {
	e.recallMu.Lock()
	defer e.recallMu.Unlock()
	if e.recalls == nil || len(e.recalls) >= maxPendingRecalls {
		e.recalls = map[string]core.TurnRecall{}
	}
	e.recalls[key] = r
}

func (e *Engine) dropRecall(key string) {
	e.recallMu.Lock()
	defer e.recallMu.Unlock()
	delete(e.recalls, key)
}
