package main

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/marlowe-bot/marlowe/engine"
)

// minRetention keeps retention off the texts of conversations still going on.
const minRetention = time.Hour

// parseRetention reads MARLOWE_RETENTION: "" or "off" (0: keep everything),
// a number of days ("90d"), or a Go duration ("36h"), at least minRetention.
func parseRetention(v string) (time.Duration, error) {
	v = strings.TrimSpace(v)
	if v == "" || strings.EqualFold(v, "off") {
		return 0, nil
	}
	bad := fmt.Errorf("MARLOWE_RETENTION=%q: want a number of days (90d), a Go duration of at least %s (36h), or off", v, minRetention)
	var d time.Duration
	if days, ok := strings.CutSuffix(v, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n <= 0 || n > 100*365 {
			return 0, bad
		}
		d = time.Duration(n) * 24 * time.Hour
	} else {
		var err error
		if d, err = time.ParseDuration(v); err != nil {
			return 0, bad
		}
	}
	if d < minRetention {
		return 0, bad
	}
	return d, nil
}

// Retention passes: every retentionTick, or at once again while a pass
// stopped at its bound (retentionBatch redactions).
const (
	retentionTick  = 10 * time.Minute
	retentionBatch = 500
)

// runRetention redacts what is older than limit until ctx ends; with an
// elector, only on the replica holding the "retention" lease, so two
// replicas never redact the same channel at once.
func runRetention(ctx context.Context, eng *engine.Engine, elect elector, limit time.Duration, log *slog.Logger) {
	log.Info("retention on", "older_than", limit)
	if elect == nil {
		retentionLoop(ctx, eng, limit, log)
		return
	}
	for ctx.Err() == nil {
		held, release, err := elect.Acquire(ctx, "retention")
		if err != nil {
			if ctx.Err() == nil {
				log.Warn("retention lease unavailable; retrying", "error", err)
				sleepCtx(ctx, retentionTick)
			}
			continue
		}
		retentionLoop(held, eng, limit, log)
		release()
	}
}

func retentionLoop(ctx context.Context, eng *engine.Engine, limit time.Duration, log *slog.Logger) {
	for ctx.Err() == nil {
		p, err := eng.Retain(ctx, limit, retentionBatch)
		switch {
		case err != nil && ctx.Err() == nil:
			log.Warn("retention pass failed", "error", err)
		case len(p.Redacted) > 0:
			log.Info("retention redacted", "channels", p.Channels, "kinds", p.Redacted, "more", p.More)
		}
		if err == nil && p.More {
			continue
		}
		sleepCtx(ctx, retentionTick)
	}
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
