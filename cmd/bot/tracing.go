package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/marlowe-bot/marlowe/engine"
	"github.com/marlowe-bot/marlowe/internal/telemetry"
	"github.com/marlowe-bot/marlowe/llm"
)

// engineTracing hands the engine the tracer provider only when tracing is
// on, so that off means no spans at all.
func engineTracing(t *telemetry.Tracing, info llm.Info) engine.Tracing {
	if t == nil || !t.Enabled {
		return engine.Tracing{}
	}
	return engine.Tracing{Provider: t.Provider, Content: t.Content, Model: info.Primary.Model}
}

// flushTraces exports what is buffered at shutdown, bounded: a collector
// that is down must not hold the process.
func flushTraces(t *telemetry.Tracing, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := t.Shutdown(ctx); err != nil {
		log.Warn("traces not flushed at shutdown", "error", err)
	}
}
