package telemetry_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
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
		{name: "grpc protocol", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://h:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, err: "http/protobuf"},
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
			defer tr.Shutdown(context.Background())
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
	mu   sync.Mutex
	reqs []*collectortrace.ExportTraceServiceRequest
	got  chan struct{}
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

// TestOTLPRoundTrip exports through the real OTLP/HTTP exporter to a
// receiver in the test, flushed by Shutdown as serve does at exit; the run
// trace convention (a trace id without a span id asks for that trace)
// survives the wire.
func TestOTLPRoundTrip(t *testing.T) {
	rcv := &receiver{got: make(chan struct{}, 1)}
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	tr, err := telemetry.FromEnv(t.Context(), env(map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": srv.URL,
		"OTEL_SERVICE_NAME":           "marlowe-test",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if !tr.Enabled {
		t.Fatal("tracing off with an endpoint set")
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
	r, c := names["marlowe.run"], names["chat m"]
	if r == nil || c == nil {
		t.Fatalf("spans = %v", names)
	}
	if len(r.ParentSpanId) != 0 {
		t.Errorf("the run span has a parent %x: the hint became a parent", r.ParentSpanId)
	}
	if !bytes.Equal(c.ParentSpanId, r.SpanId) {
		t.Errorf("child's parent %x, want the run span %x", c.ParentSpanId, r.SpanId)
	}
	if len(c.Attributes) != 1 || c.Attributes[0].Key != "gen_ai.usage.input_tokens" || c.Attributes[0].GetValue().GetIntValue() != 12 {
		t.Errorf("child attributes = %v", c.Attributes)
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
