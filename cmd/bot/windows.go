package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/intent"
)

// rebuildWindows derives every channel's open intent windows from the
// journal's message.posted commands into store.
func rebuildWindows(ctx context.Context, j core.Journal, store intent.WindowStore, log *slog.Logger) (int, error) {
	chs, err := j.Channels(ctx)
	if err != nil {
		return 0, fmt.Errorf("rebuild windows: %w", err)
	}
	total := 0
	for _, ch := range chs {
		cmds, err := j.Read(ctx, ch, 1, 0)
		if err != nil {
			return total, fmt.Errorf("rebuild windows of %s: %w", ch, err)
		}
		n, err := intent.Rebuild(ctx, store, cmds, nil, time.Now())
		if err != nil {
			return total, fmt.Errorf("rebuild windows of %s: %w", ch, err)
		}
		total += n
	}
	log.Info("intent windows rebuilt from the journal", "channels", len(chs), "open_windows", total)
	return total, nil
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
