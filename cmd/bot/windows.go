package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/intent"
)

// rebuildWindows derives the open intent windows from the journal's tail
// into store: only posts recent enough to have a window still open are read
// (Journal.PostsSince), never every channel's journal.
func rebuildWindows(ctx context.Context, j core.Journal, store intent.WindowStore, log *slog.Logger) (int, error) {
	now := time.Now()
	since, err := windowHorizon(ctx, j, now)
	if err != nil {
		return 0, fmt.Errorf("rebuild windows: %w", err)
	}
	cmds, err := j.PostsSince(ctx, since)
	if err != nil {
		return 0, fmt.Errorf("rebuild windows: %w", err)
	}
	n, err := intent.Rebuild(ctx, store, cmds, nil, now)
	if err != nil {
		return n, fmt.Errorf("rebuild windows: %w", err)
	}
	log.Info("intent windows rebuilt from the journal", "since", since.UTC().Format(time.RFC3339), "commands", len(cmds), "open_windows", n)
	return n, nil
}

// windowHorizon returns the earliest time a post still opening a window at
// now can have been made: now less the longest window any policy the
// journal has ever set (or the defaults) gives.
func windowHorizon(ctx context.Context, j core.Journal, now time.Time) (time.Time, error) {
	longest := max(core.DefaultThreadWindow, core.DefaultToplevelWindow)
	pols, err := j.Policies(ctx)
	if err != nil {
		return time.Time{}, err
	}
	for _, c := range pols {
		pc, err := core.Decode[*core.PolicyChanged](c)
		if err != nil {
			return time.Time{}, fmt.Errorf("read policy %s: %w", c, err)
		}
		longest = max(longest, pc.Policy.ThreadWindow(), pc.Policy.ToplevelWindow())
	}
	return now.Add(-longest), nil
}

// epoch is the Redis marker that says whether Redis still holds its data.
type epoch interface {
	Lost(ctx context.Context) (bool, error)
	Mark(ctx context.Context) error
}

// rebuildIfLost rebuilds the windows when Redis is new or came back empty,
// then marks it. It reports whether it rebuilt.
func rebuildIfLost(ctx context.Context, j core.Journal, store intent.WindowStore, ep epoch, log *slog.Logger) (bool, error) {
	lost, err := ep.Lost(ctx)
	if err != nil || !lost {
		return false, err
	}
	if _, err := rebuildWindows(ctx, j, store, log); err != nil {
		return false, err
	}
	return true, ep.Mark(ctx)
}

// redisEpochInterval is how often serve checks that Redis kept its data.
const redisEpochInterval = time.Second

// watchRedisEpoch rebuilds the windows each time Redis comes back empty
// (a restart without persistence), so follow-ups in windows opened before
// it are still answered. It returns when ctx ends.
func watchRedisEpoch(ctx context.Context, every time.Duration, j core.Journal, store intent.WindowStore, ep epoch, log *slog.Logger) {
	t := time.NewTicker(every)
	defer t.Stop()
	down := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		rebuilt, err := rebuildIfLost(ctx, j, store, ep, log)
		switch {
		case err != nil && ctx.Err() == nil:
			if !down {
				log.Warn("redis or the journal is unavailable; intent windows will be rebuilt when both answer", "error", err)
			}
			down = true
		case err == nil:
			if rebuilt {
				log.Warn("redis came back without its data: intent windows were rebuilt from the journal")
			} else if down {
				log.Info("redis answers again with its data intact")
			}
			down = false
		}
	}
}
