package pacer_test

import (
	"context"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/internal/pacer"
)

// TestRefusalsAreEventsOnTheCallersSpan: each 429 the pacer waits out is an
// event on the span of the call's context (a post's, when traced), so a
// trace shows a post's retries.
func TestRefusalsAreEventsOnTheCallersSpan(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer tp.Shutdown(context.Background())
	p := pacer.New(time.Now, unpaced[string]())
	ctx, span := tp.Tracer("t").Start(t.Context(), "marlowe.post")
	tries := 0
	err := p.Do(ctx, "C1", core.PriorityNormal, "", func(context.Context) error {
		if tries++; tries <= 2 {
			return errLimited{after: 10 * time.Millisecond}
		}
		return nil
	})
	span.End()
	if err != nil {
		t.Fatal(err)
	}
	evs := exp.GetSpans().Snapshots()[0].Events()
	if len(evs) != 2 || evs[0].Name != "marlowe.rate_limited" {
		t.Fatalf("events = %+v, want two marlowe.rate_limited", evs)
	}
	if v := evs[0].Attributes[0]; v.Key != "marlowe.retry_after_seconds" || v.Value.AsFloat64() != 0.01 {
		t.Errorf("attribute = %v", v)
	}
}
