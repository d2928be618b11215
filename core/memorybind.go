package core

import (
	"context"
	"errors"
	"time"
)

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

// MemoryInfo is one memory as the `memories` listing shows it.
type MemoryInfo struct {
	ID   string
	Text string
	At   time.Time
	// By wrote it: a person, a run (a tool on someone's behalf) or the
	// system (the operator CLI).
	By Actor
	// For is the person a run wrote it for, when known: the engine fills
	// it from the journal (the run's requester), never from the memory.
	For       string
	Forgotten bool
	Deleted   bool
}

// Author is the person a memory belongs to for a privacy delete: its
// writer, or the person a run wrote it for ("" when nobody is known).
func (m MemoryInfo) Author() string {
	if m.By.Type == ActorHuman {
		return m.By.ID
	}
	return m.For
}

// MemoryLister is a ChannelMemory (and, through the engine's binding, a
// ToolMemory) that lists the channel's live memories, newest first.
type MemoryLister interface {
	ListMemories(ctx context.Context, offset, limit int) ([]MemoryInfo, error)
}

// MemoryDeleter is a ChannelMemory that can destroy a memory (a privacy
// deletion) in a person's name. It takes an actor, so only the engine holds
// it: the boundMemory a tool gets never exposes it.
type MemoryDeleter interface {
	DescribeMemory(ctx context.Context, id string) (MemoryInfo, error)
	Delete(ctx context.Context, by Actor, id, reason string) error
}

// MemoryEraser is a MemoryDeleter whose deletion also erases the memory's
// text from the channel's journal and reports what it redacted.
type MemoryEraser interface {
	MemoryDeleter
	Erase(ctx context.Context, by Actor, id, reason string) (Erasure, error)
}

// BindMemory returns the handle a tool call gets: every write through it is
// stamped with prov. The engine calls it for each call; tests of tools call
// it to stand in for the engine.
func BindMemory(m ChannelMemory, prov Provenance) ToolMemory {
	return boundMemory{m: m, prov: prov}
}

// BindMemoryWithAuthors is BindMemory for the engine: authorOf names the
// person a run wrote a memory for (from the journal), so MemoryInfo.For is
// filled in listings.
func BindMemoryWithAuthors(m ChannelMemory, prov Provenance, authorOf func(Actor) string) ToolMemory {
	return boundMemory{m: m, prov: prov, authorOf: authorOf}
}

// boundMemory keeps its ChannelMemory unexported: a tool cannot reach the
// provenance-taking handle through it.
type boundMemory struct {
	m    ChannelMemory
	prov Provenance
	// authorOf names the person a run wrote a memory for (the engine's
	// journal-derived view); nil leaves MemoryInfo.For empty.
	authorOf func(Actor) string
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

// ListMemories lists the channel's live memories when the memory can, with
// the person behind each run-written memory filled in by the engine.
func (b boundMemory) ListMemories(ctx context.Context, offset, limit int) ([]MemoryInfo, error) {
	l, ok := b.m.(MemoryLister)
	if !ok {
		return nil, errNoListing
	}
	out, err := l.ListMemories(ctx, offset, limit)
	if err != nil {
		return nil, err
	}
	if b.authorOf != nil {
		for i := range out {
			out[i].For = b.authorOf(out[i].By)
		}
	}
	return out, nil
}

var errNoListing = errors.New("this channel's memory cannot list its memories")
