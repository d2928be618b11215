package core

import "context"

// ToolMemory is one channel's memory as a tool sees it. It takes no actor
// and no provenance: the engine binds those, per call, from the command
// that caused the write (the call's tool.requested, made by the run), so no
// tool can attribute a memory to a person or another run.
type ToolMemory interface {
	Remember(ctx context.Context, text string) (id string, err error)
	Recall(ctx context.Context, query string, limit int) ([]Recalled, error)
	Forget(ctx context.Context, id, reason string) error
}

// actorForgetter is a ChannelMemory that records who forgot (memory/).
type actorForgetter interface {
	ForgetAs(ctx context.Context, by Actor, id, reason string) error
}

// statusRecaller is a ChannelMemory that says whether recall was lexical only.
type statusRecaller interface {
	RecallWithStatus(ctx context.Context, query string, limit int) ([]Recalled, bool, error)
}

// BindMemory returns the handle a tool call gets: every write through it is
// stamped with prov. The engine calls it for each call; tests of tools call
// it to stand in for the engine.
func BindMemory(m ChannelMemory, prov Provenance) ToolMemory {
	return boundMemory{m: m, prov: prov}
}

// boundMemory keeps its ChannelMemory unexported: a tool cannot reach the
// provenance-taking handle through it.
type boundMemory struct {
	m    ChannelMemory
	prov Provenance
}

func (b boundMemory) Remember(ctx context.Context, text string) (string, error) {
	return b.m.Remember(ctx, text, b.prov)
}

func (b boundMemory) Recall(ctx context.Context, query string, limit int) ([]Recalled, error) {
	return b.m.Recall(ctx, query, limit)
}

// RecallWithStatus reports whether recall ran on keywords only, when the
// memory can tell.
func (b boundMemory) RecallWithStatus(ctx context.Context, query string, limit int) ([]Recalled, bool, error) {
	if sr, ok := b.m.(statusRecaller); ok {
		return sr.RecallWithStatus(ctx, query, limit)
	}
	hits, err := b.m.Recall(ctx, query, limit)
	return hits, false, err
}

func (b boundMemory) Forget(ctx context.Context, id, reason string) error {
	if f, ok := b.m.(actorForgetter); ok {
		return f.ForgetAs(ctx, b.prov.Actor, id, reason)
	}
	return b.m.Forget(ctx, id, reason)
}
