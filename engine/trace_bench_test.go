package engine_test

import (
	"context"
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/coretest"
	"github.com/marlowe-bot/marlowe/engine"
	"github.com/marlowe-bot/marlowe/internal/telemetry"
	"github.com/marlowe-bot/marlowe/store/sqlite"
)

// discard is a span exporter that drops what it is given: the benchmark
// measures making, batching and handing over spans, not a network.
type discard struct{}

func (discard) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discard) Shutdown(context.Context) error                             { return nil }

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkRunTracing measures one whole run, over an in-memory journal
// (the engine's own cost alone) and over SQLite on disk (as an embedded
// install runs), (a routed mention, a model
// step asking for a tool, the tool, a final answer: ingress, two model
// calls, one tool call, posts and about a dozen journal appends) with
// tracing off and on (the SDK's batch processor over an exporter that
// drops spans), sampling every run or one in ten (OTEL_TRACES_SAMPLER=
// parentbased_traceidratio, OTEL_TRACES_SAMPLER_ARG=0.1) or none (what
// an unsampled run costs). cpu-ns/run is the process's user+system CPU per run.
func BenchmarkRunTracing(b *testing.B) {
	type variant struct {
		name    string
		sampler sdktrace.Sampler // nil: tracing off
		sqlite  bool             // the journal in SQLite on disk, not in memory
	}
	var variants []variant
	for _, j := range []string{"mem", "sqlite"} {
		variants = append(variants,
			variant{j + "/off", nil, j == "sqlite"},
			variant{j + "/on", sdktrace.ParentBased(sdktrace.AlwaysSample()), j == "sqlite"},
			variant{j + "/on-ratio-0.1", sdktrace.ParentBased(sdktrace.TraceIDRatioBased(0.1)), j == "sqlite"},
			variant{j + "/on-unsampled", sdktrace.ParentBased(sdktrace.NeverSample()), j == "sqlite"})
	}
	for _, c := range variants {
		b.Run(c.name, func(b *testing.B) {
			s := coretest.NewFakeSurface(platform, botID)
			m := coretest.NewScriptedModel(
				coretest.Calls(coretest.Call("c1", "note", `{"text":"x"}`)),
				coretest.Text("done"),
			)
			cfg := func(c *engine.Config) {}
			if c.sampler != nil {
				tr := telemetry.New(sdktrace.NewBatchSpanProcessor(discard{}), "bench", c.sampler)
				b.Cleanup(func() { _ = tr.Shutdown(context.Background()) })
				cfg = func(c *engine.Config) { c.Tracing = engine.Tracing{Provider: tr.Provider, Model: "bench"} }
			}
			if c.sqlite {
				st, err := sqlite.Open(b.Context(), filepath.Join(b.TempDir(), "j.db"), coretest.NewSigner(b))
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { _ = st.Close() })
				traced := cfg
				cfg = func(c *engine.Config) { traced(c); c.Journal = st }
			}
			e := benchEngineWith(b, m, s, cfg, noteTool(&toolLog{}))
			b.ReportAllocs()
			b.ResetTimer()
			cpu := cpuTime()
			for i := range b.N {
				ev := core.Event{Scope: chanScope(fmt.Sprintf("C%d", i%64)), Visibility: core.Public, MessageID: fmt.Sprintf("M%d", i), Author: alice, Text: "go", MentionsBot: true}
				if err := e.Deliver(context.Background(), core.Inbound{Event: &ev}); err != nil {
					b.Fatal(err)
				}
				if err := e.WaitIdle(context.Background()); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64((cpuTime()-cpu).Nanoseconds())/float64(b.N), "cpu-ns/run")
		})
	}
}
