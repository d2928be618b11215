package connectors

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// metaServer is a go-sdk server over streamable HTTP whose echo answers
// the request's params._meta as go-sdk decoded it; fail answers isError
// (its text a marker), refuse a JSON-RPC error.
func metaServer(t *testing.T) Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "meta", Version: "1"}, nil)
	obj := json.RawMessage(`{"type":"object"}`)
	ro := &mcp.ToolAnnotations{ReadOnlyHint: true}
	srv.AddTool(&mcp.Tool{Name: "echo", InputSchema: obj, Annotations: ro},
		func(_ context.Context, r *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			b, _ := json.Marshal(r.Params.Meta)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}}, nil
		})
	srv.AddTool(&mcp.Tool{Name: "fail", InputSchema: obj, Annotations: ro},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "no such issue"}}}, nil
		})
	srv.AddTool(&mcp.Tool{Name: "refuse", InputSchema: obj, Annotations: ro},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "no such issue"}
		})
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(hs.Close)
	return Server{Name: "s", Type: HTTP, URL: hs.URL, Timeout: 20 * time.Second}
}

func stdioMetaServer(*testing.T) Server {
	return Server{Name: "s", Type: Stdio, Command: testServerBin, Env: map[string]string{"TESTSERVER_ECHO_META": "1"}, Timeout: 20 * time.Second}
}

// recorder is a tracer provider over an in-memory exporter.
func recorder(t *testing.T, sampler sdktrace.Sampler) (*sdktrace.TracerProvider, *tracetest.InMemoryExporter) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sdktrace.NewSimpleSpanProcessor(exp)), sdktrace.WithSampler(sampler))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp, exp
}

// spanNamed is the one exported span named name.
func spanNamed(t *testing.T, exp *tracetest.InMemoryExporter, name string) tracetest.SpanStub {
	t.Helper()
	var found []tracetest.SpanStub
	for _, s := range exp.GetSpans() {
		if s.Name == name {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		var names []string
		for _, s := range exp.GetSpans() {
			names = append(names, s.Name)
		}
		t.Fatalf("%d spans named %q, want 1 (spans: %q)", len(found), name, names)
	}
	return found[0]
}

func attrs(s tracetest.SpanStub) map[string]attribute.Value {
	m := map[string]attribute.Value{}
	for _, kv := range s.Attributes {
		m[string(kv.Key)] = kv.Value
	}
	return m
}

// metaOf decodes an echo's answer: the _meta the server received.
func metaOf(t *testing.T, text string) map[string]any {
	t.Helper()
	var meta map[string]any
	if err := json.Unmarshal([]byte(text), &meta); err != nil {
		t.Fatalf("the server's answer %q: %v", text, err)
	}
	return meta
}

// TestToolCallIsAnMCPClientSpan: under the engine's execute_tool span, each
// connector tools/call is a client span "tools/call <tool>" with the
// OpenTelemetry semantic conventions for MCP (method, tool, operation,
// transport, protocol version, JSON-RPC id, session id when the transport
// has one), and the request's params._meta carries THIS span's W3C trace
// context (tracestate passed on), so the server's spans hang under it. The
// servers are go-sdk's, decoding the _meta they received: the test server
// as a real stdio subprocess, and a go-sdk server over streamable HTTP.
// A tool's isError result and a JSON-RPC error mark the span failed with
// error.type (tool_error, the error code), and no content reaches it.
func TestToolCallIsAnMCPClientSpan(t *testing.T) {
	cases := []struct {
		name      string
		server    func(t *testing.T) Server
		transport string
	}{
		{name: "stdio", server: stdioMetaServer, transport: "pipe"},
		{name: "http", server: metaServer, transport: "tcp"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tp, exp := recorder(t, sdktrace.ParentBased(sdktrace.AlwaysSample()))
			srv := c.server(t)
			m, _ := startConfig(t, &Config{File: "t.json", FindToolAfter: DefaultFindToolAfter, Servers: []Server{srv}}, Options{Tracing: Tracing{Provider: tp}})
			state, err := trace.ParseTraceState("vendor=v1")
			if err != nil {
				t.Fatal(err)
			}
			remote := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1, 2, 3}, SpanID: trace.SpanID{4, 5}, TraceFlags: trace.FlagsSampled, TraceState: state, Remote: true})
			ctx, parent := tp.Tracer("t").Start(trace.ContextWithRemoteSpanContext(t.Context(), remote), "execute_tool s__echo")
			obs, err := call(t, ctx, m, "s__echo", `{"text":"MARKER-ARGS"}`)
			parent.End()
			if err != nil {
				t.Fatal(err)
			}
			span := spanNamed(t, exp, "tools/call echo")
			if span.SpanKind != trace.SpanKindClient {
				t.Errorf("kind = %v, want client", span.SpanKind)
			}
			if span.Parent.SpanID() != parent.SpanContext().SpanID() || span.SpanContext.TraceID() != parent.SpanContext().TraceID() {
				t.Errorf("parent = %v, want the execute_tool span %v", span.Parent.SpanID(), parent.SpanContext().SpanID())
			}
			if span.Status.Code != codes.Unset {
				t.Errorf("status = %v, want unset", span.Status)
			}
			a := attrs(span)
			want := map[string]string{
				"mcp.method.name": "tools/call", "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "echo",
				"network.transport": c.transport, "marlowe.connector.server": "s",
			}
			for k, v := range want {
				if got := a[k].AsString(); got != v {
					t.Errorf("%s = %q, want %q", k, got, v)
				}
			}
			if v := a["mcp.protocol.version"].AsString(); !regexp.MustCompile(`^\d{4}-\d{2}-\d{2}$`).MatchString(v) {
				t.Errorf("mcp.protocol.version = %q, want the negotiated version", v)
			}
			if v := a["jsonrpc.request.id"].AsString(); !regexp.MustCompile(`^\d+$`).MatchString(v) {
				t.Errorf("jsonrpc.request.id = %q, want the request's id", v)
			}
			if c.transport == "tcp" {
				u, _ := url.Parse(srv.URL)
				if a["mcp.session.id"].AsString() == "" {
					t.Error("no mcp.session.id over streamable HTTP")
				}
				if a["network.protocol.name"].AsString() != "http" || a["server.address"].AsString() != u.Hostname() || a["server.port"].AsInt64() == 0 {
					t.Errorf("network.protocol.name, server.address, server.port = %v, %v, %v; want http, %s, its port", a["network.protocol.name"], a["server.address"], a["server.port"], u.Hostname())
				}
			} else if _, ok := a["mcp.session.id"]; ok {
				t.Errorf("stdio span has mcp.session.id %v: stdio has no session id", a["mcp.session.id"])
			}
			meta := metaOf(t, obs.Text)
			own := "00-" + span.SpanContext.TraceID().String() + "-" + span.SpanContext.SpanID().String() + "-01"
			if meta["traceparent"] != own {
				t.Errorf("_meta.traceparent = %v, want %s (the MCP client span's)", meta["traceparent"], own)
			}
			if meta["tracestate"] != "vendor=v1" {
				t.Errorf("_meta.tracestate = %v, want vendor=v1", meta["tracestate"])
			}

			// A tool's isError result: error.type=tool_error, status
			// Error, and neither its text nor the arguments on the span.
			ctx, parent = tp.Tracer("t").Start(t.Context(), "execute_tool s__fail")
			_, err = call(t, ctx, m, "s__fail", `{"text":"MARKER-ARGS"}`)
			parent.End()
			var te *ToolError
			if !errors.As(err, &te) {
				t.Fatalf("fail: err = %v, want a tool error", err)
			}
			span = spanNamed(t, exp, "tools/call fail")
			if got := attrs(span)["error.type"].AsString(); got != "tool_error" || span.Status.Code != codes.Error {
				t.Errorf("fail: error.type = %q, status = %v; want tool_error, Error", got, span.Status)
			}
			if c.transport == "tcp" {
				// A JSON-RPC error: its code is error.type and
				// rpc.response.status_code.
				ctx, parent = tp.Tracer("t").Start(t.Context(), "execute_tool s__refuse")
				if _, err := call(t, ctx, m, "s__refuse", `{}`); err == nil {
					t.Fatal("refuse: no error")
				}
				parent.End()
				span = spanNamed(t, exp, "tools/call refuse")
				a := attrs(span)
				if a["error.type"].AsString() != "-32602" || a["rpc.response.status_code"].AsString() != "-32602" || span.Status.Code != codes.Error {
					t.Errorf("refuse: error.type = %v, rpc.response.status_code = %v, status = %v; want -32602, -32602, Error", a["error.type"], a["rpc.response.status_code"], span.Status)
				}
			}
			for _, s := range exp.GetSpans() {
				if leak := spanText(s); strings.Contains(leak, "MARKER") || strings.Contains(leak, "no such issue") {
					t.Errorf("content on span %q without MARLOWE_TRACE_CONTENT: %s", s.Name, leak)
				}
			}
		})
	}
}

// spanText is everything a span says: attributes, status, events.
func spanText(s tracetest.SpanStub) string {
	var b strings.Builder
	b.WriteString(s.Name + " " + s.Status.Description)
	for _, kv := range s.Attributes {
		b.WriteString(" " + string(kv.Key) + "=" + kv.Value.Emit())
	}
	for _, e := range s.Events {
		b.WriteString(" " + e.Name)
		for _, kv := range e.Attributes {
			b.WriteString(" " + string(kv.Key) + "=" + kv.Value.Emit())
		}
	}
	return b.String()
}

// TestMCPClientSpanCarriesContentOnlyOptedIn: with Tracing.Content
// (MARLOWE_TRACE_CONTENT=1) the span has the call's arguments, its result
// and a failure's message.
func TestMCPClientSpanCarriesContentOnlyOptedIn(t *testing.T) {
	tp, exp := recorder(t, sdktrace.ParentBased(sdktrace.AlwaysSample()))
	m, _ := startConfig(t, &Config{File: "t.json", FindToolAfter: DefaultFindToolAfter, Servers: []Server{metaServer(t)}}, Options{Tracing: Tracing{Provider: tp, Content: true}})
	ctx, parent := tp.Tracer("t").Start(t.Context(), "execute_tool")
	defer parent.End()
	if _, err := call(t, ctx, m, "s__echo", `{"text":"MARKER-ARGS"}`); err != nil {
		t.Fatal(err)
	}
	_, _ = call(t, ctx, m, "s__fail", `{}`)
	a := attrs(spanNamed(t, exp, "tools/call echo"))
	if !strings.Contains(a["gen_ai.tool.call.arguments"].AsString(), "MARKER-ARGS") || !strings.Contains(a["gen_ai.tool.call.result"].AsString(), "traceparent") {
		t.Errorf("content on: arguments %v, result %v", a["gen_ai.tool.call.arguments"], a["gen_ai.tool.call.result"])
	}
	if s := spanNamed(t, exp, "tools/call fail"); !strings.Contains(s.Status.Description, "no such issue") {
		t.Errorf("content on: failed status %q, want the tool's message", s.Status.Description)
	}
}

// countingProvider counts the spans its tracers are asked to start.
type countingProvider struct {
	trace.TracerProvider
	mu    sync.Mutex
	names []string
}

func (p *countingProvider) Tracer(name string, opts ...trace.TracerOption) trace.Tracer {
	return countingTracer{Tracer: p.TracerProvider.Tracer(name, opts...), p: p}
}

func (p *countingProvider) started() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.names...)
}

type countingTracer struct {
	trace.Tracer
	p *countingProvider
}

func (t countingTracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	t.p.mu.Lock()
	t.p.names = append(t.p.names, name)
	t.p.mu.Unlock()
	return t.Tracer.Start(ctx, name, opts...)
}

// TestMCPClientSpanOnlyUnderASampledSpan: a call under a sampled span gets
// its MCP client span; a call outside any span (outside a run) starts none
// (it would be a one-span trace of its own) and carries no trace context;
// a call under an unsampled span (a run the sampler left out) starts none
// either, and its _meta carries the parent's context, marked not sampled,
// so the server does not sample it either. With tracing off (no
// provider) nothing is started and the caller's context is carried as
// before.
func TestMCPClientSpanOnlyUnderASampledSpan(t *testing.T) {
	sampled, _ := recorder(t, sdktrace.ParentBased(sdktrace.AlwaysSample()))
	unsampled, _ := recorder(t, sdktrace.ParentBased(sdktrace.NeverSample()))
	cases := []struct {
		name     string
		provider trace.TracerProvider // the manager's; nil: tracing off
		parent   trace.TracerProvider // the caller's span's; nil: none
		want     []string             // spans the manager starts
		meta     string               // the traceparent's flags; "" none
		own      bool                 // the traceparent is the MCP span's
	}{
		{name: "sampled", provider: sampled, parent: sampled, want: []string{"tools/call echo"}, meta: "01", own: true},
		{name: "outside any span", provider: sampled},
		{name: "unsampled", provider: unsampled, parent: unsampled, meta: "00"},
		{name: "tracing off", parent: sampled, meta: "01"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var opts Options
			counter := &countingProvider{TracerProvider: c.provider}
			if c.provider != nil {
				opts.Tracing = Tracing{Provider: counter}
			}
			m, _ := startConfig(t, &Config{File: "t.json", FindToolAfter: DefaultFindToolAfter, Servers: []Server{stdioMetaServer(t)}}, opts)
			ctx := t.Context()
			var parent trace.Span
			if c.parent != nil {
				ctx, parent = c.parent.Tracer("t").Start(ctx, "execute_tool s__echo")
				defer parent.End()
			}
			obs, err := call(t, ctx, m, "s__echo", `{}`)
			if err != nil {
				t.Fatal(err)
			}
			if got := counter.started(); strings.Join(got, ",") != strings.Join(c.want, ",") {
				t.Errorf("spans started = %q, want %q", got, c.want)
			}
			tp, _ := metaOf(t, obs.Text)["traceparent"].(string)
			if c.meta == "" {
				if tp != "" {
					t.Errorf("_meta.traceparent = %q, want none", tp)
				}
				return
			}
			parts := strings.Split(tp, "-")
			if len(parts) != 4 || parts[1] != parent.SpanContext().TraceID().String() || parts[3] != c.meta {
				t.Fatalf("_meta.traceparent = %q, want the caller's trace with flags %s", tp, c.meta)
			}
			if own := parts[2] != parent.SpanContext().SpanID().String(); own != c.own {
				t.Errorf("_meta.traceparent = %q: the MCP span's = %v, want %v", tp, own, c.own)
			}
		})
	}
}

// TestMCPClientSpanOfAFailedServer: a server that dies in the middle of a
// call fails that call's span (error.type=transport_error: no JSON-RPC
// answer came); a call while it is down, with nothing sent, is still a
// tools/call span, failed with error.type=connector_down and no session
// or request id, as an HTTP client span records a refused connection.
func TestMCPClientSpanOfAFailedServer(t *testing.T) {
	tp, exp := recorder(t, sdktrace.ParentBased(sdktrace.AlwaysSample()))
	m, st := startConfig(t, &Config{File: "t.json", FindToolAfter: DefaultFindToolAfter, Servers: []Server{stdioMetaServer(t)}},
		Options{Tracing: Tracing{Provider: tp}, MinBackoff: time.Hour})
	ctx, parent := tp.Tracer("t").Start(t.Context(), "execute_tool")
	defer parent.End()
	if _, err := call(t, ctx, m, "s__crash", `{}`); err == nil {
		t.Fatal("crash: no error")
	}
	st.await(t, "the server down", func(s State) bool { return s.Status == "down" })
	if _, err := call(t, ctx, m, "s__echo", `{}`); !errors.Is(err, ErrDown) {
		t.Fatalf("echo while down: err = %v, want ErrDown", err)
	}
	crash := spanNamed(t, exp, "tools/call crash")
	if got := attrs(crash)["error.type"].AsString(); got != "transport_error" || crash.Status.Code != codes.Error {
		t.Errorf("crash: error.type = %q, status = %v; want transport_error, Error", got, crash.Status)
	}
	down := spanNamed(t, exp, "tools/call echo")
	a := attrs(down)
	if a["error.type"].AsString() != "connector_down" || down.Status.Code != codes.Error || down.Status.Description != "failed" {
		t.Errorf("down: error.type = %v, status = %v; want connector_down, Error \"failed\"", a["error.type"], down.Status)
	}
	if down.Parent.SpanID() != parent.SpanContext().SpanID() || down.SpanKind != trace.SpanKindClient {
		t.Errorf("down: parent %v kind %v, want the execute_tool span, client", down.Parent.SpanID(), down.SpanKind)
	}
	for _, k := range []string{"jsonrpc.request.id", "mcp.session.id", "mcp.protocol.version"} {
		if v, ok := a[k]; ok {
			t.Errorf("down: %s = %v, but nothing was sent", k, v)
		}
	}
}
