package slack

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/marlowe-bot/marlowe/adapters/slack/slackfake"
	"github.com/marlowe-bot/marlowe/engine"
	"github.com/marlowe-bot/marlowe/internal/telemetry"
	"github.com/marlowe-bot/marlowe/internal/testengine"
)

// TestRateLimitWarningCarriesTheRunsTrace: a run with tracing on posts its
// answer, Slack refuses the post once with a 429, and the adapter's
// warning about waiting it out is logged with the post's context: it
// carries the run's trace id and the marlowe.post span's id.
func TestRateLimitWarningCarriesTheRunsTrace(t *testing.T) {
	f := newFake(t, func(c *slackfake.Config) { c.EchoPosts = true })
	logs := &logBuffer{}
	log := slog.New(telemetry.LogHandler(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	a, _ := newAdapter(t, testConfig(f, ModeSocket), WithLogger(log))
	exp := tracetest.NewInMemoryExporter()
	tr := telemetry.New(sdktrace.NewSimpleSpanProcessor(exp), "test", nil)
	defer tr.Shutdown(context.Background())
	eng, _ := testengine.Start(t, a, teammateModel{}, log, func(c *engine.Config) {
		c.Tracing = engine.Tracing{Provider: tr.Provider, Model: "test-model"}
	})
	run(t, a, eng.Deliver)
	if !f.WaitConnected(5 * time.Second) {
		t.Fatal("no connection")
	}
	f.RateLimit("chat.postMessage", 1, time.Second)
	f.Say(chPublic, "", alice, botMention(f)+" how did the deploy go?")
	waitPost(t, f, func(p slackfake.Post) bool { return strings.Contains(p.Text, "deploy finished") })
	if err := eng.WaitIdle(t.Context()); err != nil {
		t.Fatal(err)
	}
	var line string
	for l := range strings.SplitSeq(logs.String(), "\n") {
		if strings.Contains(l, `msg="slack: rate limited; waiting as told"`) {
			line = l
		}
	}
	if line == "" {
		t.Fatalf("no rate-limit warning in the logs:\n%s", logs.String())
	}
	var run, post sdktrace.ReadOnlySpan
	for _, s := range exp.GetSpans().Snapshots() {
		switch s.Name() {
		case "marlowe.run":
			run = s
		case "marlowe.post":
			for _, e := range s.Events() {
				if e.Name == "marlowe.rate_limited" {
					post = s
				}
			}
		}
	}
	if run == nil || post == nil {
		t.Fatal("no run span, or no post span that was rate limited")
	}
	if want := "trace_id=" + run.SpanContext().TraceID().String(); !strings.Contains(line, want) {
		t.Errorf("warning %q, want %s (the run's trace)", line, want)
	}
	if want := "span_id=" + post.SpanContext().SpanID().String(); !strings.Contains(line, want) {
		t.Errorf("warning %q, want %s (the refused post's span)", line, want)
	}
}
