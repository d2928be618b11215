package telemetry_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/stats"
	"google.golang.org/protobuf/proto"

	"github.com/marlowe-bot/marlowe/internal/telemetry"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestOffUnlessAnExporterIsConfigured(t *testing.T) {
	cases := []struct {
		name    string
		env     map[string]string
		enabled bool
		err     string
	}{
		{name: "nothing set", env: nil},
		{name: "service name alone", env: map[string]string{"OTEL_SERVICE_NAME": "x"}},
		{name: "endpoint", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, enabled: true},
		{name: "traces endpoint", env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, enabled: true},
		{name: "exporter otlp", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, enabled: true},
		{name: "sdk disabled wins", env: map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}},
		{name: "exporter none wins", env: map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}},
		{name: "unknown exporter", env: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, err: "OTEL_TRACES_EXPORTER"},
		{name: "grpc protocol", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://h:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, enabled: true},
		{name: "grpc traces protocol", env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "h:4317", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc"}, enabled: true},
		{name: "grpc default endpoint", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, enabled: true},
		{name: "json protocol", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://h:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, err: "want http/protobuf or grpc"},
		{name: "unknown protocol", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://h:4318", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "thrift"}, err: "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=\"thrift\""},
		{name: "grpc bad scheme", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "ftp://h:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, err: "http:// or https://"},
		{name: "grpc bad insecure", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "h:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_INSECURE": "maybe"}, err: "OTEL_EXPORTER_OTLP_INSECURE"},
		{name: "bad sampler", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://h:4318", "OTEL_TRACES_SAMPLER": "sometimes"}, err: "OTEL_TRACES_SAMPLER"},
		{name: "bad ratio", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://h:4318", "OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "2"}, err: "OTEL_TRACES_SAMPLER_ARG"},
		{name: "bad disabled", env: map[string]string{"OTEL_SDK_DISABLED": "perhaps"}, err: "OTEL_SDK_DISABLED"},
		{name: "bad content flag", env: map[string]string{"MARLOWE_TRACE_CONTENT": "yes"}, err: "MARLOWE_TRACE_CONTENT"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tr, err := telemetry.FromEnv(t.Context(), env(c.env))
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err = %v, want one naming %s", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			// Nothing listens at these endpoints: shut down without
			// waiting out the exporter's retries.
			done, cancel := context.WithCancel(context.Background())
			cancel()
			defer tr.Shutdown(done)
			if tr.Enabled != c.enabled {
				t.Fatalf("enabled = %v, want %v (%s)", tr.Enabled, c.enabled, tr.Description)
			}
			_, span := tr.Provider.Tracer("t").Start(t.Context(), "x")
			if span.IsRecording() != c.enabled {
				t.Errorf("span recording = %v with tracing enabled %v", span.IsRecording(), c.enabled)
			}
			span.End()
		})
	}
}

func TestEndpointCredentialsStayOutOfTheDescription(t *testing.T) {
	tr, err := telemetry.FromEnv(t.Context(), env(map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://user:s3cret@collector.example:4318/v1/traces?token=s3cret"}))
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Shutdown(context.Background())
	if strings.Contains(tr.Description, "s3cret") || !strings.Contains(tr.Description, "collector.example:4318") {
		t.Fatalf("description = %q", tr.Description)
	}
}

// receiver is an OTLP/HTTP trace endpoint: it decodes each export with
// the collector's protobuf types.
type receiver struct {
	collectortrace.UnimplementedTraceServiceServer
	mu   sync.Mutex
	reqs []*collectortrace.ExportTraceServiceRequest
	got  chan struct{}
	// What the gRPC exports came with: the API key header, the time left
	// before the call's deadline and the request's compression.
	apiKey      []string
	left        []time.Duration
	compression []string
}

// Export is the collector's gRPC trace service (the generated
// TraceServiceServer of go.opentelemetry.io/proto/otlp).
func (r *receiver) Export(ctx context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	var left time.Duration
	if d, ok := ctx.Deadline(); ok {
		left = time.Until(d)
	}
	r.mu.Lock()
	r.reqs = append(r.reqs, req)
	r.apiKey = append(r.apiKey, md.Get("x-api-key")...)
	r.left = append(r.left, left)
	r.mu.Unlock()
	select {
	case r.got <- struct{}{}:
	default:
	}
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

// HandleRPC records the compression of each inbound gRPC request.
func (r *receiver) HandleRPC(_ context.Context, s stats.RPCStats) {
	if h, ok := s.(*stats.InHeader); ok {
		r.mu.Lock()
		r.compression = append(r.compression, h.Compression)
		r.mu.Unlock()
	}
}

func (r *receiver) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context   { return ctx }
func (r *receiver) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }
func (r *receiver) HandleConn(context.Context, stats.ConnStats)                       {}

// serveGRPC runs the collector's trace service on a local port.
func serveGRPC(t *testing.T, rcv *receiver) (addr string) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.StatsHandler(rcv))
	collectortrace.RegisterTraceServiceServer(srv, rcv)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.URL.Path != "/v1/traces" || req.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "want protobuf at /v1/traces", http.StatusBadRequest)
		return
	}
	var body io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	b, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var m collectortrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(b, &m); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	r.reqs = append(r.reqs, &m)
	r.mu.Unlock()
	out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
	select {
	case r.got <- struct{}{}:
	default:
	}
}

func (r *receiver) spans() (service string, spans []*tracepb.Span) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, req := range r.reqs {
		for _, rs := range req.ResourceSpans {
			for _, kv := range rs.GetResource().GetAttributes() {
				if kv.Key == "service.name" {
					service = kv.GetValue().GetStringValue()
				}
			}
			for _, ss := range rs.ScopeSpans {
				spans = append(spans, ss.Spans...)
			}
		}
	}
	return service, spans
}

// TestOTLPRoundTrip exports through the real OTLP exporters, over
// HTTP/protobuf to a receiver in the test and over gRPC to the collector's
// generated trace service, flushed by Shutdown as serve does at exit; the
// run trace convention (a trace id without a span id asks for that trace)
// and the service name survive the wire. Over gRPC the exporter's own
// variables (headers, timeout, compression) reach the server.
func TestOTLPRoundTrip(t *testing.T) {
	cases := []struct {
		name string
		// env builds the configuration for a receiver; process is set in
		// the process environment, which the exporter reads itself.
		env     func(t *testing.T, rcv *receiver) map[string]string
		process map[string]string
		grpc    bool
		desc    string
	}{
		{name: "http/protobuf", desc: "OTLP/HTTP to http://127.0.0.1:", env: func(t *testing.T, rcv *receiver) map[string]string {
			srv := httptest.NewServer(rcv)
			t.Cleanup(srv.Close)
			return map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": srv.URL}
		}},
		{name: "grpc base endpoint", grpc: true, desc: "OTLP/gRPC to http://127.0.0.1:", env: func(t *testing.T, rcv *receiver) map[string]string {
			return map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://" + serveGRPC(t, rcv), "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}
		}, process: map[string]string{
			"OTEL_EXPORTER_OTLP_HEADERS":     "x-api-key=s3cret",
			"OTEL_EXPORTER_OTLP_TIMEOUT":     "7000",
			"OTEL_EXPORTER_OTLP_COMPRESSION": "gzip",
		}},
		{name: "grpc traces host:port insecure", grpc: true, desc: "OTLP/gRPC to 127.0.0.1:", env: func(t *testing.T, rcv *receiver) map[string]string {
			return map[string]string{
				"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": serveGRPC(t, rcv),
				"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc",
				"OTEL_EXPORTER_OTLP_TRACES_INSECURE": "true",
				// The per-signal variables win over the general ones.
				"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1",
				"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
			}
		}, process: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_HEADERS": "x-api-key=k2"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for k, v := range c.process {
				t.Setenv(k, v)
			}
			rcv := &receiver{got: make(chan struct{}, 1)}
			e := c.env(t, rcv)
			e["OTEL_SERVICE_NAME"] = "marlowe-test"
			tr, err := telemetry.FromEnv(t.Context(), env(e))
			if err != nil {
				t.Fatal(err)
			}
			if !tr.Enabled {
				t.Fatal("tracing off with an endpoint set")
			}
			if !strings.HasPrefix(tr.Description, c.desc) {
				t.Errorf("description = %q, want %q…", tr.Description, c.desc)
			}
			want := trace.TraceID{0x01, 0x9c, 0xad, 0xc6, 0x9a, 0x80, 0x01, 0x73, 0x0e, 0xed, 0xee, 0x60, 0x20, 0x75, 0x39, 0x99}
			ctx := trace.ContextWithSpanContext(t.Context(), trace.NewSpanContext(trace.SpanContextConfig{TraceID: want}))
			ctx, root := tr.Provider.Tracer("t").Start(ctx, "marlowe.run", trace.WithAttributes(attribute.String("marlowe.run.id", "R1")))
			_, child := tr.Provider.Tracer("t").Start(ctx, "chat m", trace.WithAttributes(attribute.Int("gen_ai.usage.input_tokens", 12)))
			child.End()
			root.End()
			if err := tr.Shutdown(t.Context()); err != nil {
				t.Fatalf("shutdown (flush): %v", err)
			}
			<-rcv.got
			service, spans := rcv.spans()
			if service != "marlowe-test" {
				t.Errorf("service.name = %q", service)
			}
			if len(spans) != 2 {
				t.Fatalf("spans received = %d, want 2", len(spans))
			}
			names := map[string]*tracepb.Span{}
			for _, s := range spans {
				names[s.Name] = s
				if !bytes.Equal(s.TraceId, want[:]) {
					t.Errorf("span %s trace id %x, want %x", s.Name, s.TraceId, want)
				}
			}
			r, ch := names["marlowe.run"], names["chat m"]
			if r == nil || ch == nil {
				t.Fatalf("spans = %v", names)
			}
			if len(r.ParentSpanId) != 0 {
				t.Errorf("the run span has a parent %x: the hint became a parent", r.ParentSpanId)
			}
			if !bytes.Equal(ch.ParentSpanId, r.SpanId) {
				t.Errorf("child's parent %x, want the run span %x", ch.ParentSpanId, r.SpanId)
			}
			if len(ch.Attributes) != 1 || ch.Attributes[0].Key != "gen_ai.usage.input_tokens" || ch.Attributes[0].GetValue().GetIntValue() != 12 {
				t.Errorf("child attributes = %v", ch.Attributes)
			}
			if !c.grpc {
				return
			}
			rcv.mu.Lock()
			defer rcv.mu.Unlock()
			key := c.process["OTEL_EXPORTER_OTLP_HEADERS"] + c.process["OTEL_EXPORTER_OTLP_TRACES_HEADERS"]
			if len(rcv.apiKey) != 1 || "x-api-key="+rcv.apiKey[0] != key {
				t.Errorf("x-api-key = %q, want %q from the headers variable", rcv.apiKey, key)
			}
			if c.process["OTEL_EXPORTER_OTLP_TIMEOUT"] != "" && (len(rcv.left) != 1 || rcv.left[0] > 7*time.Second || rcv.left[0] <= 0) {
				t.Errorf("time left before the export's deadline = %v, want at most the 7 s of OTEL_EXPORTER_OTLP_TIMEOUT (default 10 s)", rcv.left)
			}
			wantComp := c.process["OTEL_EXPORTER_OTLP_COMPRESSION"]
			if len(rcv.compression) != 1 || rcv.compression[0] != wantComp {
				t.Errorf("request compression = %q, want %q", rcv.compression, wantComp)
			}
		})
	}
}

// TestModelCallsCarryTraceparent: the transport the model clients use
// sends W3C trace context of the span in the request's context.
func TestModelCallsCarryTraceparent(t *testing.T) {
	var got string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Get("traceparent")
	}))
	defer srv.Close()
	tr := telemetry.New(noExport{}, "t", nil)
	defer tr.Shutdown(context.Background())
	client := &http.Client{Transport: tr.Transport(nil)}
	ctx, span := tr.Provider.Tracer("t").Start(t.Context(), "chat m")
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, nil)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	span.End()
	tid := span.SpanContext().TraceID().String()
	if !strings.HasPrefix(got, "00-"+tid+"-") {
		t.Fatalf("traceparent = %q, want one in trace %s", got, tid)
	}
	// A request made outside any span (a connector's handshake, its tool
	// list) starts no trace of its own and carries no traceparent.
	exp := tracetest.NewInMemoryExporter()
	solo := telemetry.New(sdktrace.NewSimpleSpanProcessor(exp), "t", nil)
	defer solo.Shutdown(context.Background())
	got = "(not reached)"
	req, _ = http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL, nil)
	resp, err = (&http.Client{Transport: solo.Transport(nil)}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if spans := exp.GetSpans(); len(spans) != 0 || got != "" {
		t.Errorf("a request outside any span made %d spans, traceparent %q", len(spans), got)
	}
	// Off, the transport is the base one: nothing is added.
	if off := telemetry.Off(); off.Transport(http.DefaultTransport) != http.DefaultTransport {
		t.Error("tracing off still wraps the transport")
	}
}

func TestLogRecordsCarryTraceAndSpanIDs(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(telemetry.LogHandler(slog.NewTextHandler(&buf, nil))).With("component", "x")
	tr := telemetry.New(noExport{}, "t", nil)
	defer tr.Shutdown(context.Background())
	ctx, span := tr.Provider.Tracer("t").Start(t.Context(), "s")
	log.InfoContext(ctx, "inside")
	span.End()
	log.InfoContext(t.Context(), "outside")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	sc := span.SpanContext()
	if !strings.Contains(lines[0], "trace_id="+sc.TraceID().String()) || !strings.Contains(lines[0], "span_id="+sc.SpanID().String()) {
		t.Errorf("traced line = %q", lines[0])
	}
	if strings.Contains(lines[1], "trace_id") {
		t.Errorf("untraced line = %q", lines[1])
	}
}

// noExport is a span processor that drops everything.
type noExport struct{}

func (noExport) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (noExport) OnEnd(sdktrace.ReadOnlySpan)                     {}
func (noExport) Shutdown(context.Context) error                  { return nil }
func (noExport) ForceFlush(context.Context) error                { return nil }
