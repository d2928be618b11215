package failover_test

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/marlowe-bot/marlowe/llm/failover"
	"github.com/marlowe-bot/marlowe/llm/llmtest"
)

// TestFailoverIsCountedAndNotedOnTheCallersSpan: a call that goes to the
// secondary tells the hook why (the failovers metric) and leaves an event
// on the engine's model call span.
func TestFailoverIsCountedAndNotedOnTheCallersSpan(t *testing.T) {
	p, s := llmtest.NewOpenAIServer(t), llmtest.NewOpenAIServer(t)
	p.Enqueue(llmtest.Unavailable())
	s.Enqueue(llmtest.Text("from the secondary"))
	var reasons []string
	m := failover.New(openAIModel(t, p, "primary"), openAIModel(t, s, "secondary"), failover.WithLogger(quiet()),
		failover.WithNames("openai primary-model at p", "openai secondary-model at s"),
		failover.WithOnFailover(func(why string) { reasons = append(reasons, why) }))
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer tp.Shutdown(context.Background())
	ctx, span := tp.Tracer("t").Start(context.Background(), "chat primary-model")
	if _, err := m.Step(ctx, runView()); err != nil {
		t.Fatal(err)
	}
	span.End()
	if len(reasons) != 1 || reasons[0] != "unavailable" {
		t.Errorf("failover hook heard %v, want [unavailable]", reasons)
	}
	spans := exp.GetSpans().Snapshots()
	if len(spans) != 1 {
		t.Fatalf("spans = %d", len(spans))
	}
	evs := spans[0].Events()
	if len(evs) != 1 || evs[0].Name != "marlowe.model.failover" {
		t.Fatalf("events = %+v", evs)
	}
	got := map[string]string{}
	for _, kv := range evs[0].Attributes {
		got[string(kv.Key)] = kv.Value.AsString()
	}
	if got["marlowe.model.failover_reason"] != "unavailable" || got["marlowe.model.secondary"] != "openai secondary-model at s" {
		t.Errorf("event attributes = %v", got)
	}
}
