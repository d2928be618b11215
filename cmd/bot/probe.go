package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/llm"
)

// probeModels makes one minimal call to each configured model endpoint
// (primary, fallback, embeddings) in the background and logs what came
// back, so a wrong base URL or model name shows at start rather than as
// the first message's failure. The returned func waits for it to finish.
func probeModels(ctx context.Context, cfg config, log *slog.Logger) (wait func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		results, err := llm.ProbeEnv(ctx, cfg.Getenv)
		if ctx.Err() != nil {
			return // shutting down: the outcome says nothing about the model
		}
		if err != nil {
			log.Warn("model probe: configuration", "err", err)
			return
		}
		for _, r := range results {
			if r.OK() {
				log.Info("model probe answered", "role", r.Role, "provider", r.Endpoint.Provider, "model", r.Endpoint.Model,
					"url", r.URL, "answer", r.Answer, "elapsed", r.Elapsed.Round(time.Millisecond))
				continue
			}
			attrs := []any{"role", r.Role, "provider", r.Endpoint.Provider, "model", r.Endpoint.Model, "url", r.URL}
			if me, ok := core.AsModelError(r.Err); ok {
				attrs = append(attrs, "failure", string(me.Failure), "status", me.Status,
					"got", redactDSN(oneLine(me.Err.Error())), "likely_cause", me.Hint)
			} else {
				attrs = append(attrs, "err", redactDSN(r.Err.Error()))
			}
			log.Warn("model probe failed: what needs this model will fail the same way until it is fixed (bot doctor re-checks)", attrs...)
		}
	}()
	return func() { <-done }
}
