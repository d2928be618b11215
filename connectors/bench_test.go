package connectors

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/marlowe-bot/marlowe/core"
)

// The harness's overhead per call: the same echo call through the
// Manager's tool (lookup, timeout, metrics hook, result conversion) and
// straight on a go-sdk session to the same kind of server. The difference
// is what Marlowe adds; each reports its p50.
//
//	go test -run '^$' -bench Call -benchtime 2000x ./connectors/

func BenchmarkCallStdioEcho(b *testing.B) {
	b.Run("harness", func(b *testing.B) {
		m := New(&Config{File: "b.json", Servers: []Server{{Name: "t", Type: Stdio, Command: testServerBin, Timeout: time.Minute}}}, Options{Observe: func(string, string, time.Duration, string) {}})
		m.Start(context.Background())
		defer m.Close()
		if err := m.WaitReady(context.Background()); err != nil {
			b.Fatal(err)
		}
		tool, ok := m.Tool("t__echo")
		if !ok {
			b.Fatal("no echo")
		}
		benchCalls(b, func() error {
			_, err := tool.Run(context.Background(), core.ToolContext{}, json.RawMessage(`{"text":"ping"}`))
			return err
		})
	})
	b.Run("raw-session", func(b *testing.B) {
		c := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
		s, err := c.Connect(context.Background(), &mcp.CommandTransport{Command: exec.Command(testServerBin)}, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		benchCalls(b, func() error {
			_, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: json.RawMessage(`{"text":"ping"}`)})
			return err
		})
	})
}

func BenchmarkCallStreamableHTTPEcho(b *testing.B) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "echo", InputSchema: json.RawMessage(`{"type":"object"}`), Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, r *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(r.Params.Arguments)}}}, nil
		})
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	defer hs.Close()
	b.Run("harness", func(b *testing.B) {
		m := New(&Config{File: "b.json", Servers: []Server{{Name: "h", Type: HTTP, URL: hs.URL, Timeout: time.Minute}}}, Options{Observe: func(string, string, time.Duration, string) {}})
		m.Start(context.Background())
		defer m.Close()
		if err := m.WaitReady(context.Background()); err != nil {
			b.Fatal(err)
		}
		tool, ok := m.Tool("h__echo")
		if !ok {
			b.Fatalf("no echo: %+v", m.States())
		}
		benchCalls(b, func() error {
			_, err := tool.Run(context.Background(), core.ToolContext{}, json.RawMessage(`{"text":"ping"}`))
			return err
		})
	})
	b.Run("raw-session", func(b *testing.B) {
		c := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
		s, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: hs.URL}, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		benchCalls(b, func() error {
			_, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: json.RawMessage(`{"text":"ping"}`)})
			return err
		})
	})
}

// benchCalls runs call b.N times and reports the p50 and p90 latency.
func benchCalls(b *testing.B, call func() error) {
	b.Helper()
	took := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		if err := call(); err != nil {
			b.Fatal(err)
		}
		took = append(took, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(took[len(took)*9/10].Microseconds()), "p90-µs")
}

// What the MCP client span costs a call (trace.go): the same stdio echo
// with tracing off (no provider), under an unsampled span (no span is
// started) and under a sampled one (a span, its attributes, the request
// id noted, the SDK's batch processor over an exporter that drops them).
//
//	go test -run '^$' -bench CallTracing -benchtime 2000x -benchmem ./connectors/
func BenchmarkCallTracing(b *testing.B) {
	for _, c := range []struct {
		name    string
		sampler sdktrace.Sampler // nil: tracing off
	}{
		{"off", nil},
		{"unsampled", sdktrace.ParentBased(sdktrace.NeverSample())},
		{"sampled", sdktrace.ParentBased(sdktrace.AlwaysSample())},
	} {
		b.Run(c.name, func(b *testing.B) {
			var opts Options
			ctx := context.Background()
			if c.sampler != nil {
				tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()), sdktrace.WithSampler(c.sampler))
				defer tp.Shutdown(context.Background())
				opts.Tracing = Tracing{Provider: tp}
				var span trace.Span
				ctx, span = tp.Tracer("b").Start(ctx, "execute_tool t__echo")
				defer span.End()
			}
			m := New(&Config{File: "b.json", Servers: []Server{{Name: "t", Type: Stdio, Command: testServerBin, Timeout: time.Minute}}}, opts)
			m.Start(context.Background())
			defer m.Close()
			if err := m.WaitReady(context.Background()); err != nil {
				b.Fatal(err)
			}
			tool, ok := m.Tool("t__echo")
			if !ok {
				b.Fatal("no echo")
			}
			b.ReportAllocs()
			benchCalls(b, func() error {
				_, err := tool.Run(ctx, core.ToolContext{}, json.RawMessage(`{"text":"ping"}`))
				return err
			})
		})
	}
}
