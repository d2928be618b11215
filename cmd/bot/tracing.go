package main

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/marlowe-bot/marlowe/connectors"
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

// connectorOptions are the connectors' tracing options: with tracing on,
// each tools/call is an MCP client span under the tool call's and its
// requests carry that span's trace context; off, none (no spans, the
// connectors' default HTTP client).
func connectorOptions(t *telemetry.Tracing) connectors.Options {
	if t == nil || !t.Enabled {
		return connectors.Options{}
	}
	return connectors.Options{HTTPClient: connectorHTTPClient(t), Tracing: connectors.Tracing{Provider: t.Provider, Content: t.Content}}
}

// connectorHTTPClient is the HTTP client of remote connectors (MCP over
// streamable HTTP or SSE): with tracing on, each request is a client span
// under the tool call's and carries its W3C traceparent to the server; off,
// nil (the connectors' default client).
func connectorHTTPClient(t *telemetry.Tracing) func(string) *http.Client {
	if t == nil || !t.Enabled {
		return nil
	}
	return func(string) *http.Client { return &http.Client{Transport: t.Transport(nil)} }
}
