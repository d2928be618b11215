package core

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
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
	Status    RunStatus
	Steer     []uint64
	EndNotice string
	Requester Person
	StartedAt string
}

func dumpFold(f *channelFold) (FoldDump, error) {
	st, err := json.Marshal(f.state())
	if err != nil {
		return FoldDump{}, fmt.Errorf("dump state: %w", err)
	}
	runs := map[string]runDump{}
	for id, r := range f.runs {
		d := runDump{Thread: r.thread, Status: r.status, EndNotice: r.endNotice, Requester: r.requester, StartedAt: r.startedAt.UTC().String()}
		for _, c := range r.steer {
			d.Steer = append(d.Steer, c.Seq())
		}
		runs[id] = d
	}
	seen := make([]string, 0, len(f.seen))
	for id := range f.seen {
		seen = append(seen, id)
	}
	slices.Sort(seen)
	eng, err := json.Marshal(struct {
		PolicySet    bool
		Consents     map[string]*consentGrant
		Revoked      map[string]bool
		Approvals    map[string]*approvalView
		Runs         map[string]runDump
		Threads      map[string]string
		Seen         []string
		DayTokens    map[string]int
		History      map[string][]ThreadTurn
		HistoryOrder []string
		Routines     map[string]*Routine
	}{f.policySet, f.consents, f.revokedConsents, f.approvals, runs, f.threads, seen, f.dayTokens, f.history, f.historyOrder, f.routines})
	if err != nil {
		return FoldDump{}, fmt.Errorf("dump engine fields: %w", err)
	}
	return FoldDump{State: string(st), Engine: string(eng)}, nil
}

// FoldDumpOf folds cmds from nothing, as `bot replay` does.
func FoldDumpOf(ch ChannelKey, cmds []Command) (FoldDump, error) {
	f := newChannelFold(ch)
	for _, c := range cmds {
		if err := f.apply(c); err != nil {
			return FoldDump{}, err
		}
	}
	return dumpFold(&f)
}

// EngineFoldDump renders the engine's live cache of ch (loading it from
// the journal if the engine has not touched ch yet).
func EngineFoldDump(ctx context.Context, e *Engine, ch ChannelKey) (FoldDump, error) {
	v, err := e.channel(ctx, ch)
	if err != nil {
		return FoldDump{}, err
	}
	var d FoldDump
	var derr error
	if err := v.with(ctx, func() { d, derr = dumpFold(&v.channelFold) }); err != nil {
		return FoldDump{}, err
	}
	return d, derr
}

// AppendVia appends drafts (of one channel) through the engine's cache, as
// every append the engine makes does.
func AppendVia(ctx context.Context, e *Engine, drafts ...Draft) ([]Command, error) {
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
func (e *Engine) Loaded(ch ChannelKey) bool {
	e.chMu.Lock()
	v := e.channels[ch]
	e.chMu.Unlock()
	return v != nil && v.isLoaded()
}
