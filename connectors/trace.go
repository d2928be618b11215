package connectors

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/marlowe-bot/marlowe/core"
)

// Tracing configures the MCP client spans: each tools/call, under the
// caller's span (the engine's execute_tool), is a client span named
// "tools/call <tool>" with the attributes of the OpenTelemetry semantic
// conventions for MCP, and its params._meta carries that span's trace
// context, so the server's spans hang under it. The zero value makes none
// (the call still carries its caller's trace context, if any).
type Tracing struct {
	// Provider makes the spans (nil: none).
	Provider trace.TracerProvider
	// Content lets a call's arguments, its result and error messages
	// become attributes (MARLOWE_TRACE_CONTENT=1). Off, no span carries
	// any of them.
	Content bool
}

// Span and attribute names (docs/operations.md lists them).
const (
	methodToolsCall = "tools/call"

	attrMCPMethod      = "mcp.method.name"
	attrMCPSession     = "mcp.session.id"
	attrMCPProtocol    = "mcp.protocol.version"
	attrRequestID      = "jsonrpc.request.id"
	attrRPCStatus      = "rpc.response.status_code"
	attrGenOp          = "gen_ai.operation.name"
	attrGenToolName    = "gen_ai.tool.name"
	attrGenToolArgs    = "gen_ai.tool.call.arguments" // content
	attrGenToolResult  = "gen_ai.tool.call.result"    // content
	attrNetTransport   = "network.transport"
	attrNetProtocol    = "network.protocol.name"
	attrServerAddress  = "server.address"
	attrServerPort     = "server.port"
	attrErrorType      = "error.type"
	attrConnectorServe = "marlowe.connector.server"
)

// tracer is a Manager's tracer; tr nil means no spans at all.
type tracer struct {
	tr      trace.Tracer
	content bool
	opts    []trace.SpanStartOption // made once, not per span
}

func newTracer(t Tracing) tracer {
	if t.Provider == nil {
		return tracer{}
	}
	return tracer{
		tr:      t.Provider.Tracer("github.com/marlowe-bot/marlowe/connectors"),
		content: t.Content,
		opts:    []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindClient)},
	}
}

// spanAttrs are the attributes every call span of server s carries:
// its name in Marlowe's config, the transport and, for a remote server,
// its address (the URL's host and port only: never its path, query or
// credentials).
func spanAttrs(s Server) []attribute.KeyValue {
	attrs := []attribute.KeyValue{
		attribute.String(attrMCPMethod, methodToolsCall),
		attribute.String(attrGenOp, "execute_tool"),
		attribute.String(attrConnectorServe, s.Name),
	}
	if s.Type == Stdio {
		return append(attrs, attribute.String(attrNetTransport, "pipe"))
	}
	attrs = append(attrs, attribute.String(attrNetTransport, "tcp"), attribute.String(attrNetProtocol, "http"))
	if u, err := url.Parse(s.URL); err == nil && u.Hostname() != "" {
		attrs = append(attrs, attribute.String(attrServerAddress, u.Hostname()))
		port := u.Port()
		if port == "" {
			port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
		}
		if p, err := strconv.Atoi(port); err == nil {
			attrs = append(attrs, attribute.Int(attrServerPort, p))
		}
	}
	return attrs
}

// callSpanKey holds, in a call's context, its MCP client span: the
// request writers (idConn, idRoundTripper) note the JSON-RPC id on it.
type callSpanKey struct{}

// startSpan starts the MCP client span of one tools/call of remote. It
// starts none with tracing off; outside any span (a call outside a run
// would start a one-span trace of its own); or under a span that is not
// sampled (its child would not be either, under every sampler the bot
// configures: the SDK would make a span and a context for nothing). conn
// is nil when the server is not connected.
func (s *server) startSpan(ctx context.Context, remote string, conn *connection, args json.RawMessage) (context.Context, trace.Span) {
	t := s.m.tracer
	if t.tr == nil {
		return ctx, nil
	}
	if sc := trace.SpanContextFromContext(ctx); !sc.IsValid() || !sc.IsSampled() {
		return ctx, nil
	}
	ctx, span := t.tr.Start(ctx, methodToolsCall+" "+remote, t.opts...)
	if !span.IsRecording() {
		return ctx, span
	}
	attrs := make([]attribute.KeyValue, 0, len(s.spanAttrs)+4)
	attrs = append(attrs, s.spanAttrs...)
	attrs = append(attrs, attribute.String(attrGenToolName, remote))
	if conn != nil && conn.session != nil {
		if id := conn.session.ID(); id != "" {
			attrs = append(attrs, attribute.String(attrMCPSession, id))
		}
		if r := conn.session.InitializeResult(); r != nil && r.ProtocolVersion != "" {
			attrs = append(attrs, attribute.String(attrMCPProtocol, r.ProtocolVersion))
		}
	}
	if t.content {
		attrs = append(attrs, attribute.String(attrGenToolArgs, string(args)))
	}
	span.SetAttributes(attrs...)
	return context.WithValue(ctx, callSpanKey{}, span), span
}

// endSpan records how the call ended and ends its span. outcome is the
// call's (Options.Observe's): a failure sets error.type (the JSON-RPC
// error code, tool_error for a result with isError, timeout, cancelled,
// connector_down, else transport_error) and status Error. rpcErr is the
// error CallTool returned. An error's text is content (a server's refusal
// may quote the arguments): without the opt-in the status says "failed".
func (s *server) endSpan(span trace.Span, outcome string, rpcErr error, obs core.Observation, err error) {
	if span == nil {
		return
	}
	if !span.IsRecording() {
		span.End()
		return
	}
	content := s.m.tracer.content
	if outcome == "ok" {
		if content {
			span.SetAttributes(attribute.String(attrGenToolResult, obs.Text))
		}
		span.End()
		return
	}
	class := outcome // timeout, cancelled
	switch outcome {
	case "tool-error":
		class = "tool_error"
	case "down":
		class = "connector_down"
	case "error":
		class = "transport_error"
		var we *jsonrpc.Error
		if errors.As(rpcErr, &we) {
			class = strconv.FormatInt(we.Code, 10)
			span.SetAttributes(attribute.String(attrRPCStatus, class))
		}
	}
	span.SetAttributes(attribute.String(attrErrorType, class))
	desc := "failed"
	if content && err != nil {
		desc = err.Error()
		span.RecordError(err)
	}
	span.SetStatus(codes.Error, desc)
	span.End()
}

// noteRequestID sets jsonrpc.request.id on the MCP client span ctx holds.
func noteRequestID(ctx context.Context, id string) {
	if span, ok := ctx.Value(callSpanKey{}).(trace.Span); ok && id != "" {
		span.SetAttributes(attribute.String(attrRequestID, id))
	}
}

// idTransport notes each tools/call's JSON-RPC id on its span. It wraps
// only transports whose connections have no optional interfaces go-sdk
// looks for on the client side (stdio's, SSE's); streamable HTTP's do
// (its session state), so there idRoundTripper reads the id instead.
type idTransport struct{ mcp.Transport }

func (t idTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return idConn{c}, nil
}

type idConn struct{ mcp.Connection }

func (c idConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if r, ok := msg.(*jsonrpc.Request); ok && r.Method == methodToolsCall && r.IsCall() {
		noteRequestID(ctx, idString(r.ID.Raw()))
	}
	return c.Connection.Write(ctx, msg)
}

func idString(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case int64:
		return strconv.FormatInt(v, 10)
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	return ""
}

// idRoundTripper notes the JSON-RPC id of a tools/call sent over HTTP on
// the call's span: go-sdk posts each request with the call's context. It
// reads the body only for a request under an MCP client span.
type idRoundTripper struct{ base http.RoundTripper }

func (t idRoundTripper) RoundTrip(r *http.Request) (*http.Response, error) {
	if _, ok := r.Context().Value(callSpanKey{}).(trace.Span); ok && r.Method == http.MethodPost && r.GetBody != nil {
		if body, err := r.GetBody(); err == nil {
			var m struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
			}
			if json.NewDecoder(body).Decode(&m) == nil && m.Method == methodToolsCall && len(m.ID) > 0 {
				var id any
				if json.Unmarshal(m.ID, &id) == nil {
					noteRequestID(r.Context(), idString(id))
				}
			}
			_ = body.Close()
		}
	}
	return t.base.RoundTrip(r)
}

// traceMeta is the W3C trace context of ctx's span (traceparent and, when
// set, tracestate) for a request's params._meta, where the OpenTelemetry
// semantic conventions for MCP carry it: a stdio server has no headers, and
// a remote one gets it both ways. Under a call's MCP client span it is that
// span's. Nil outside a span (tracing off).
func traceMeta(ctx context.Context) mcp.Meta {
	c := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, c)
	if len(c) == 0 {
		return nil
	}
	m := make(mcp.Meta, len(c))
	for k, v := range c {
		m[k] = v
	}
	return m
}
