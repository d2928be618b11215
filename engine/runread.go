package engine

import (
	"context"
	"fmt"

	"github.com/marlowe-bot/marlowe/core"
)

// A finished run leaves the channel's fold once enough newer runs have
// ended (core/fold/bound.go). What the engine still asks of such a run,
// whom it was working for, it reads from the run's commands in the
// journal instead.

// authorOf names the person behind a memory writer: the person, or the
// requester of the run that wrote it (the author of the run's trigger
// message; a redacted trigger keeps its author in the envelope).
func authorOf(ctx context.Context, v *chanView, by core.Actor) (string, error) {
	switch by.Type {
	case core.ActorHuman:
		return by.ID, nil
	case core.ActorAgent:
	default:
		return "", nil
	}
	var who string
	kept := false
	if err := v.with(ctx, func() {
		if r := v.fold.Run(by.ID); r != nil {
			who, kept = r.Requester.ID, true
		}
	}); err != nil {
		return "", err
	}
	if kept {
		return who, nil
	}
	cmds, err := v.j.ReadRun(ctx, by.ID)
	if err != nil {
		return "", fmt.Errorf("read run %s: %w", by.ID, err)
	}
	for _, c := range cmds {
		if c.Channel() != v.key {
			continue
		}
		switch c.Kind() {
		case core.KindMessageReceived:
			if c.Actor().Type == core.ActorHuman {
				return c.Actor().ID, nil // the trigger, journaled before run.started
			}
		case core.KindRunStarted:
			return "", nil // started without a person's message: unattended
		default:
		}
	}
	return "", nil
}

// fillFor sets For on each memory: whom its writer wrote it for.
func fillFor(ctx context.Context, v *chanView, got []core.MemoryInfo) error {
	for i := range got {
		who, err := authorOf(ctx, v, got[i].By)
		if err != nil {
			return err
		}
		got[i].For = who
	}
	return nil
}
