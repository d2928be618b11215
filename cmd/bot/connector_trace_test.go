package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/marlowe-bot/marlowe/connectors"
	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/internal/telemetry"
)

// TestConnectorCallsCarryTraceparent: with tracing on (serve's wiring,
// connectorOptions), a remote connector's tool call is an MCP client span
// "tools/call <tool>" under the call's span (the engine's execute_tool),
// its HTTP requests are client spans under that one and carry their W3C
// trace context, so the MCP server's own traces join the run's.
func TestConnectorCallsCarryTraceparent(t *testing.T) {
	t.Parallel()
	srv := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "echo", InputSchema: json.RawMessage(`{"type":"object"}`), Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, r *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
		})
	var mu sync.Mutex
	var seen []string
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("traceparent"))
		mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	defer hs.Close()

	exp := tracetest.NewInMemoryExporter()
	tr := telemetry.New(sdktrace.NewSimpleSpanProcessor(exp), "t", nil)
	defer tr.Shutdown(context.Background())
	m := connectors.New(&connectors.Config{File: "t.json", Servers: []connectors.Server{{Name: "h", Type: connectors.HTTP, URL: hs.URL, Timeout: time.Minute}}},
		connectorOptions(tr))
	m.Start(t.Context())
	defer m.Close()
	if err := m.WaitReady(t.Context()); err != nil {
		t.Fatal(err)
	}
	tool, ok := m.Tool("h__echo")
	if !ok {
		t.Fatalf("no echo tool: %+v", m.States())
	}
	ctx, span := tr.Provider.Tracer("t").Start(t.Context(), "execute_tool h__echo")
	if _, err := tool.Run(ctx, core.ToolContext{}, json.RawMessage(`{}`)); err != nil {
		t.Fatal(err)
	}
	span.End()
	var call sdktrace.ReadOnlySpan
	for _, s := range exp.GetSpans().Snapshots() {
		if s.Name() == "tools/call echo" {
			call = s
		}
	}
	if call == nil || call.Parent().SpanID() != span.SpanContext().SpanID() || call.SpanKind() != trace.SpanKindClient {
		t.Fatalf("no MCP client span tools/call echo under execute_tool: %v", call)
	}
	var requests []string // the HTTP client spans under the MCP span
	for _, s := range exp.GetSpans().Snapshots() {
		if s.Parent().SpanID() == call.SpanContext().SpanID() && s.SpanKind() == trace.SpanKindClient {
			requests = append(requests, "00-"+s.SpanContext().TraceID().String()+"-"+s.SpanContext().SpanID().String()+"-01")
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.ContainsFunc(seen, func(tp string) bool { return slices.Contains(requests, tp) }) {
		t.Errorf("no request carried the traceparent of an HTTP span under tools/call echo (%q): %q", requests, seen)
	}
	// Off, connectors keep their own default client and make no spans.
	if off := connectorOptions(telemetry.Off()); off.HTTPClient != nil || off.Tracing.Provider != nil {
		t.Error("tracing off still replaces the connectors' HTTP client or gives them a tracer")
	}
}
