package engine

import (
	"context"

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

func dumpFold(f *fold.Channel) (FoldDump, error) {
	st, internal, err := f.Dump()
	return FoldDump{State: st, Engine: internal}, err
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

// EngineTurnRefs lists the seqs of the conversation turns the engine's
// live fold of ch keeps (what its next runs are given).
func EngineTurnRefs(ctx context.Context, e *Engine, ch core.ChannelKey) ([]uint64, error) {
	v, err := e.channel(ctx, ch)
	if err != nil {
		return nil, err
	}
	var refs []uint64
	err = v.with(ctx, func() { refs = v.fold.TurnRefs() })
	return refs, err
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

// ErasePerson runs the erasure job's work (what a confirmed `forget me`
// does) for person on platform, and returns how many records it redacted.
func ErasePerson(ctx context.Context, e *Engine, platform, person string) (int, error) {
	got, err := e.erasePerson(ctx, platform, person, core.Person{ID: person}, "bench", func(int, int) {})
	n := 0
	for _, pc := range got.channels {
		n += pc.erasure.RemovedTotal()
	}
	return n, err
}

// LoadedViews counts the channels whose fold the engine holds.
func LoadedViews(e *Engine) int {
	e.chMu.Lock()
	vs := make([]*chanView, 0, len(e.channels))
	for _, v := range e.channels {
		vs = append(vs, v)
	}
	e.chMu.Unlock()
	n := 0
	for _, v := range vs {
		v.mu.Lock()
		if v.loaded {
			n++
		}
		v.mu.Unlock()
	}
	return n
}

// HeldViews counts the views the engine keeps, folded or not.
func HeldViews(e *Engine) int {
	e.chMu.Lock()
	defer e.chMu.Unlock()
	return len(e.channels)
}

// AboutMe is the `what do you know about me` text.
func (e *Engine) AboutMe(ctx context.Context, platform string, p core.Person) (string, error) {
	return e.aboutMeText(ctx, platform, p)
}

// SweepExports runs the expired-export sweep once.
func (e *Engine) SweepExports(ctx context.Context) error { return e.sweepExports(ctx) }

// FindApproval looks for approval id in every channel, as a click that
// names no channel does.
func FindApproval(ctx context.Context, e *Engine, id string) (bool, error) {
	v, _, err := e.findApproval(ctx, core.Scope{}, id)
	return v != nil, err
}
