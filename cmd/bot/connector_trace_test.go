package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/marlowe-bot/marlowe/connectors"
	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/internal/telemetry"
)

// TestConnectorCallsCarryTraceparent: with tracing on, a remote
// connector's HTTP requests made for a tool call carry the W3C trace
// context of the call's span (the engine's execute_tool span), so the
// MCP server's own traces join the run's.
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
		connectors.Options{HTTPClient: connectorHTTPClient(tr)})
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
	want := "00-" + span.SpanContext().TraceID().String() + "-"
	mu.Lock()
	defer mu.Unlock()
	if !slices.ContainsFunc(seen, func(tp string) bool { return strings.HasPrefix(tp, want) }) {
		t.Errorf("no request carried the tool call's trace %s: %q", span.SpanContext().TraceID(), seen)
	}
	// Off, connectors keep their own default client.
	if connectorHTTPClient(telemetry.Off()) != nil {
		t.Error("tracing off still replaces the connectors' HTTP client")
	}
}
