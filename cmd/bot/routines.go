package main

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"
	_ "time/tzdata" // zones in the binary: distroless images have no zoneinfo

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/engine"
	"github.com/marlowe-bot/marlowe/replica"
	"github.com/marlowe-bot/marlowe/scheduler"
)

// newScheduler reads the routine settings (MARLOWE_ROUTINE_MIN_INTERVAL,
// MARLOWE_ROUTINE_GRACE, MARLOWE_ROUTINE_TICK: Go durations;
// MARLOWE_ROUTINE_MAX_PER_CHANNEL, MARLOWE_ROUTINE_MAX_PER_OWNER: counts)
// and builds the scheduler. Its tool joins the registry; Bind it to the engine once built.
// With an elector, replicas elect the one that fires routines.
func newScheduler(getenv func(string) string, j core.Journal, b *core.Boundary, elect elector, log *slog.Logger) (*scheduler.Scheduler, error) {
	cfg := scheduler.Config{Journal: j, Boundary: b, Logger: log}
	if elect != nil {
		cfg.Lease = elect
	}
	for name, dst := range map[string]*time.Duration{
		"MARLOWE_ROUTINE_MIN_INTERVAL": &cfg.MinInterval,
		"MARLOWE_ROUTINE_GRACE":        &cfg.Grace,
		"MARLOWE_ROUTINE_TICK":         &cfg.Tick,
	} {
		v := strings.TrimSpace(getenv(name))
		if v == "" {
			continue
		}
		d, err := parseDurationOrSeconds(v)
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("%s=%q: want a positive Go duration (5m, 1h) or seconds", name, v)
		}
		*dst = d
	}
	for name, dst := range map[string]*int{
		"MARLOWE_ROUTINE_MAX_PER_CHANNEL": &cfg.MaxPerChannel,
		"MARLOWE_ROUTINE_MAX_PER_OWNER":   &cfg.MaxPerOwner,
	} {
		v := strings.TrimSpace(getenv(name))
		if v == "" {
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%s=%q: want a positive whole number of routines", name, v)
		}
		*dst = n
	}
	return scheduler.New(cfg)
}

// runScheduler binds the scheduler to the engine and fires routines until
// ctx ends (while this replica holds the routine lease).
func runScheduler(ctx context.Context, s *scheduler.Scheduler, e *engine.Engine, log *slog.Logger) {
	s.Bind(e)
	log.Info("routines scheduler running")
	_ = s.Run(ctx)
}

// elector elects one replica for a job (routine firing, Telegram polling).
type elector interface {
	Acquire(ctx context.Context, name string) (context.Context, func(), error)
}

// electionTTL is how long an elected job waits after its holder dies.
const electionTTL = 15 * time.Second

// newElector elects through the store's lease table (Postgres for
// replicas; the embedded store's holds one process's leases).
func newElector(st *stores, cfg config) elector {
	if st.Elect == nil {
		return nil
	}
	return replica.NewElector(st.Elect, cfg.Replica, electionTTL)
}
