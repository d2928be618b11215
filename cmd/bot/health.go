package main

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/marlowe-bot/marlowe/adapters/discord"
	"github.com/marlowe-bot/marlowe/core"
)

// readier is a surface that can tell it stopped working (Slack: tokens
// revoked, app uninstalled). Surfaces without it are taken as ready.
type readier interface {
	Ready() error
}

// healthHandler answers /healthz: 200 "ok", or 503 naming each surface that
// is not ready and why, so an orchestrator or an operator sees it.
func healthHandler(surfaces map[string]core.Surface) http.Handler {
	names := slices.Sorted(maps.Keys(surfaces))
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		var bad []string
		for _, n := range names {
			if r, ok := surfaces[n].(readier); ok {
				if err := r.Ready(); err != nil {
					bad = append(bad, n+": "+err.Error())
				}
			}
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if len(bad) > 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, "not ready")
			fmt.Fprintln(w, strings.Join(bad, "\n"))
			return
		}
		fmt.Fprintln(w, "ok")
	})
}

// deliveryQueuer is a surface with a durable retry queue of inbound
// deliveries (Discord): /readyz shows what waits there, /metrics counts it.
type deliveryQueuer interface {
	DeliveryBacklog(ctx context.Context) (core.DeliveryBacklog, error)
	DeliveryRetryStats() discord.RetryStats
}
