package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/fold"
)

// Test hooks for package core_test: they reach the engine's channel cache,
// which has no exported door.

// FoldDump is a channel fold rendered for comparison: State is its exported
// view (what `bot replay` prints), Engine the fields only the engine reads.
type FoldDump struct {
	State  string
	Engine string
}

type runDump struct {
	Thread    string
	Status    core.RunStatus
	Steer     []uint64
	EndNotice string
	Requester core.Person
	StartedAt string
}

func dumpFold(f *fold.Channel) (FoldDump, error) {
	st, err := json.Marshal(f.State())
	if err != nil {
		return FoldDump{}, fmt.Errorf("dump state: %w", err)
	}
	runs := map[string]runDump{}
	for id, r := range f.Runs {
		d := runDump{Thread: r.Thread, Status: r.Status, EndNotice: r.EndNotice, Requester: r.Requester, StartedAt: r.StartedAt.UTC().String()}
		for _, c := range r.Steer {
			d.Steer = append(d.Steer, c.Seq())
		}
		runs[id] = d
	}
	seen := make([]string, 0, len(f.Seen))
	for id := range f.Seen {
		seen = append(seen, id)
	}
	slices.Sort(seen)
	eng, err := json.Marshal(struct {
		PolicySet    bool
		Consents     map[string]*fold.Grant
		Revoked      map[string]bool
		Approvals    map[string]*fold.Approval
		Runs         map[string]runDump
		Threads      map[string]string
		Seen         []string
		DayTokens    map[string]int
		History      map[string][]core.ThreadTurn
		HistoryOrder []string
		Routines     map[string]*fold.Routine
	}{f.PolicySet, f.Consents, f.RevokedConsents, f.Approvals, runs, f.Threads, seen, f.DayTokens, f.History, f.HistoryOrder, f.Routines})
	if err != nil {
		return FoldDump{}, fmt.Errorf("dump engine fields: %w", err)
	}
	return FoldDump{State: string(st), Engine: string(eng)}, nil
}

// FoldDumpOf folds cmds from nothing, as `bot replay` does.
func FoldDumpOf(ch core.ChannelKey, cmds []core.Command) (FoldDump, error) {
	f := fold.NewChannel(ch)
	for _, c := range cmds {
		if err := f.Apply(c); err != nil {
			return FoldDump{}, err
		}
	}
	return dumpFold(&f)
}

// EngineFoldDump renders the engine's live cache of ch (loading it from
// the journal if the engine has not touched ch yet).
func EngineFoldDump(ctx context.Context, e *Engine, ch core.ChannelKey) (FoldDump, error) {
	v, err := e.channel(ctx, ch)
	if err != nil {
		return FoldDump{}, err
	}
	var d FoldDump
	var derr error
	if err := v.with(ctx, func() { d, derr = dumpFold(&v.fold) }); err != nil {
		return FoldDump{}, err
	}
	return d, derr
}

// AppendVia appends drafts (of one channel) through the engine's cache, as
// every append the engine makes does.
func AppendVia(ctx context.Context, e *Engine, drafts ...core.Draft) ([]core.Command, error) {
	v, err := e.channel(ctx, drafts[0].Channel())
	if err != nil {
		return nil, err
	}
	return v.append(ctx, nil, drafts...)
}

// Hooks for the external tests (package core_test).

// EvictIdle runs one eviction pass now (the engine's goroutine runs it on a
// ticker) and returns how many channels it dropped.
func (e *Engine) EvictIdle() int { return e.evictIdle() }

// Loaded reports whether the engine holds a fold of ch.
func (e *Engine) Loaded(ch core.ChannelKey) bool {
	e.chMu.Lock()
	v := e.channels[ch]
	e.chMu.Unlock()
	return v != nil && v.isLoaded()
}
