package connectors

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// TestToolCallsCarryTraceContextInMeta: a tools/call made under a span
// carries that span's W3C trace context in params._meta (traceparent,
// tracestate), as the OpenTelemetry semantic conventions for MCP say, over
// every transport: a stdio server has no headers to carry it. The servers
// are go-sdk's, answering with the _meta go-sdk decoded: the test server
// as a real stdio subprocess, and a go-sdk server over streamable HTTP.
// A call outside any span carries no trace context.
func TestToolCallsCarryTraceContextInMeta(t *testing.T) {
	cases := []struct {
		name   string
		server func(t *testing.T) Server
	}{
		{name: "stdio", server: func(t *testing.T) Server {
			return Server{Name: "s", Type: Stdio, Command: testServerBin, Env: map[string]string{"TESTSERVER_ECHO_META": "1"}, Timeout: 20 * time.Second}
		}},
		{name: "http", server: func(t *testing.T) Server {
			srv := mcp.NewServer(&mcp.Implementation{Name: "meta", Version: "1"}, nil)
			srv.AddTool(&mcp.Tool{Name: "echo", InputSchema: json.RawMessage(`{"type":"object"}`), Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
				func(_ context.Context, r *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
					b, _ := json.Marshal(r.Params.Meta)
					return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}}, nil
				})
			hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
			t.Cleanup(hs.Close)
			return Server{Name: "s", Type: HTTP, URL: hs.URL, Timeout: 20 * time.Second}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, _ := startConfig(t, &Config{File: "t.json", FindToolAfter: DefaultFindToolAfter, Servers: []Server{c.server(t)}}, Options{})
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sdktrace.NewSimpleSpanProcessor(tracetest.NewInMemoryExporter())))
			defer tp.Shutdown(context.Background())
			state, err := trace.ParseTraceState("vendor=v1")
			if err != nil {
				t.Fatal(err)
			}
			remote := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1, 2, 3}, SpanID: trace.SpanID{4, 5}, TraceFlags: trace.FlagsSampled, TraceState: state, Remote: true})
			ctx, span := tp.Tracer("t").Start(trace.ContextWithRemoteSpanContext(t.Context(), remote), "execute_tool s__echo")
			obs, err := call(t, ctx, m, "s__echo", `{}`)
			span.End()
			if err != nil {
				t.Fatal(err)
			}
			var meta map[string]any
			if err := json.Unmarshal([]byte(obs.Text), &meta); err != nil {
				t.Fatalf("the server's answer %q: %v", obs.Text, err)
			}
			sc := span.SpanContext()
			want := "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-01"
			if meta["traceparent"] != want {
				t.Errorf("_meta.traceparent = %v, want %s (the call's span)", meta["traceparent"], want)
			}
			if meta["tracestate"] != "vendor=v1" {
				t.Errorf("_meta.tracestate = %v, want vendor=v1", meta["tracestate"])
			}
			// Outside any span (tracing off): nothing is added.
			// (go-sdk may add keys of its own.)
			obs, err = call(t, t.Context(), m, "s__echo", `{}`)
			if err != nil {
				t.Fatal(err)
			}
			meta = nil
			if err := json.Unmarshal([]byte(obs.Text), &meta); err != nil {
				t.Fatalf("the server's answer %q: %v", obs.Text, err)
			}
			if _, ok := meta["traceparent"]; ok {
				t.Errorf("untraced call's _meta = %v, want no traceparent", meta)
			}
		})
	}
}
