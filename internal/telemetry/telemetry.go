// Package telemetry sets up OpenTelemetry tracing for the bot from the
// standard OTEL_* environment variables, and holds the small pieces that
// join traces to the rest of the bot: the ID generator that gives every
// span of a run the run's trace id, the slog handler that stamps trace and
// span ids on log records, and the HTTP transport that carries W3C trace
// context to model endpoints.
//
// Nothing here is package-level mutable state: the composition root
// (cmd/bot) builds a Tracing and injects its TracerProvider where spans
// are made. The engine sees only the OpenTelemetry API.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// The environment variables read (the OpenTelemetry specification's names;
// the OTLP exporter also reads its own, such as OTEL_EXPORTER_OTLP_HEADERS).
const (
	EnvSDKDisabled    = "OTEL_SDK_DISABLED"
	EnvTracesExporter = "OTEL_TRACES_EXPORTER"
	EnvEndpoint       = "OTEL_EXPORTER_OTLP_ENDPOINT"
	EnvTracesEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	EnvProtocol       = "OTEL_EXPORTER_OTLP_PROTOCOL"
	EnvTracesProtocol = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	EnvServiceName    = "OTEL_SERVICE_NAME"
	EnvSampler        = "OTEL_TRACES_SAMPLER"
	EnvSamplerArg     = "OTEL_TRACES_SAMPLER_ARG"
	EnvInsecure       = "OTEL_EXPORTER_OTLP_INSECURE"
	EnvTracesInsecure = "OTEL_EXPORTER_OTLP_TRACES_INSECURE"
	// EnvContent opts in to message text, prompts, tool arguments and
	// results as span attributes (off by default; see docs/operations.md).
	EnvContent = "MARLOWE_TRACE_CONTENT"
)

// The OTLP protocols (values of OTEL_EXPORTER_OTLP_PROTOCOL).
const (
	ProtocolHTTP = "http/protobuf"
	ProtocolGRPC = "grpc"
)

// DefaultServiceName is service.name when OTEL_SERVICE_NAME is unset.
const DefaultServiceName = "marlowe"

// Tracing is the bot's tracer provider and how to flush it. The zero value
// is not usable; build one with FromEnv or New.
type Tracing struct {
	// Provider makes the tracers; a no-op provider when tracing is off.
	Provider trace.TracerProvider
	// Enabled is false when no exporter is configured: spans cost nothing.
	Enabled bool
	// Content is MARLOWE_TRACE_CONTENT=1: message text, prompts, tool
	// arguments and results may become attributes.
	Content bool
	// Description is one line for the start-up log (no secrets: the
	// endpoint's scheme and host only).
	Description string
	sdk         *sdktrace.TracerProvider
}

// Off is tracing switched off: a no-op provider.
func Off() *Tracing {
	return &Tracing{Provider: noop.NewTracerProvider(), Description: "off"}
}

// Shutdown flushes the spans not yet exported and stops the exporter. It
// is safe on an Off tracing.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t == nil || t.sdk == nil {
		return nil
	}
	if err := t.sdk.Shutdown(ctx); err != nil {
		return fmt.Errorf("flush traces: %w", err)
	}
	return nil
}

// FromEnv configures tracing from the standard variables, read through
// getenv (pass os.Getenv). Tracing is on only when an OTLP endpoint is
// set (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT)
// or OTEL_TRACES_EXPORTER=otlp, and OTEL_SDK_DISABLED is not true and
// OTEL_TRACES_EXPORTER is not none. Spans go over OTLP/HTTP (protobuf) or,
// with OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL=grpc, over OTLP/gRPC.
func FromEnv(ctx context.Context, getenv func(string) string) (*Tracing, error) {
	get := func(k string) string { return strings.TrimSpace(getenv(k)) }
	content, err := parseContent(get(EnvContent))
	if err != nil {
		return nil, err
	}
	if disabled, err := parseBool(EnvSDKDisabled, get(EnvSDKDisabled)); err != nil {
		return nil, err
	} else if disabled {
		t := Off()
		t.Description = "off (" + EnvSDKDisabled + "=true)"
		return t, nil
	}
	protoVar := EnvTracesProtocol
	if get(protoVar) == "" {
		protoVar = EnvProtocol
	}
	proto := get(protoVar)
	switch proto {
	case "":
		proto = ProtocolHTTP
	case ProtocolHTTP, ProtocolGRPC:
	default:
		return nil, fmt.Errorf("%s=%q is not supported: want %s or %s", protoVar, proto, ProtocolHTTP, ProtocolGRPC)
	}
	exporter := strings.ToLower(get(EnvTracesExporter))
	endpoint := get(EnvTracesEndpoint)
	if endpoint == "" {
		if base := get(EnvEndpoint); base != "" {
			endpoint = base
			if proto == ProtocolHTTP {
				// OTLP/HTTP appends the signal's path to the base URL;
				// OTLP/gRPC uses it as it is.
				endpoint = strings.TrimRight(base, "/") + "/v1/traces"
			}
		}
	}
	switch exporter {
	case "none":
		t := Off()
		t.Description = "off (" + EnvTracesExporter + "=none)"
		return t, nil
	case "":
		if endpoint == "" {
			return Off(), nil
		}
	case "otlp":
		if endpoint == "" { // the specification's defaults
			endpoint = "http://localhost:4318/v1/traces"
			if proto == ProtocolGRPC {
				endpoint = "http://localhost:4317"
			}
		}
	default:
		return nil, fmt.Errorf("%s=%q is not supported: want otlp or none", EnvTracesExporter, exporter)
	}
	sampler, err := samplerFrom(get(EnvSampler), get(EnvSamplerArg))
	if err != nil {
		return nil, err
	}
	var exp sdktrace.SpanExporter
	transport := "OTLP/HTTP"
	if proto == ProtocolGRPC {
		transport = "OTLP/gRPC"
		exp, err = grpcExporter(ctx, get, endpoint)
	} else {
		exp, err = otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(endpoint))
	}
	if err != nil {
		return nil, fmt.Errorf("%s trace exporter for %s: %w", transport, redactURL(endpoint), err)
	}
	service := get(EnvServiceName)
	if service == "" {
		service = DefaultServiceName
	}
	t := New(sdktrace.NewBatchSpanProcessor(exp), service, sampler)
	t.Content = content
	t.Description = fmt.Sprintf("%s to %s as %s", transport, redactURL(endpoint), service)
	if content {
		t.Description += ", with content (" + EnvContent + "=1)"
	}
	return t, nil
}

// grpcExporter is the OTLP/gRPC exporter for endpoint, a URL (http: in
// plain text, https: over TLS) or, as the specification allows for gRPC,
// a host:port whose transport security OTEL_EXPORTER_OTLP_(TRACES_)INSECURE
// decides (default secure). Headers, timeout, compression and certificates
// the exporter reads itself from the OTEL_EXPORTER_OTLP_* variables.
func grpcExporter(ctx context.Context, get func(string) string, endpoint string) (sdktrace.SpanExporter, error) {
	if strings.Contains(endpoint, "://") {
		u, err := url.Parse(endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, errors.New("want an http:// or https:// URL, or host:port")
		}
		return otlptracegrpc.New(ctx, otlptracegrpc.WithEndpointURL(endpoint))
	}
	name := EnvTracesInsecure
	if get(name) == "" {
		name = EnvInsecure
	}
	plain, err := parseBool(name, get(name))
	if err != nil {
		return nil, err
	}
	opts := []otlptracegrpc.Option{otlptracegrpc.WithEndpoint(endpoint)}
	if plain {
		opts = append(opts, otlptracegrpc.WithInsecure())
	}
	return otlptracegrpc.New(ctx, opts...)
}

// New builds tracing over a span processor (tests pass a syncer over an
// in-memory exporter). sampler nil means parent-based, always on.
func New(sp sdktrace.SpanProcessor, service string, sampler sdktrace.Sampler) *Tracing {
	if sampler == nil {
		sampler = sdktrace.ParentBased(sdktrace.AlwaysSample())
	}
	res := resource.NewSchemaless(attribute.String("service.name", service))
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithSpanProcessor(sp),
		sdktrace.WithSampler(sampler),
		sdktrace.WithResource(res),
		sdktrace.WithIDGenerator(newRunIDs()),
	)
	return &Tracing{Provider: tp, Enabled: true, sdk: tp, Description: "on"}
}

// Transport wraps base (nil: http.DefaultTransport) so that each request
// made under a span is a client span and carries the W3C traceparent of
// that span. A request made outside any span (a connector's handshake,
// its tool list, its event stream) passes untraced: it would otherwise
// start a one-span trace of its own. With tracing off it returns base
// unchanged: no cost.
func (t *Tracing) Transport(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	if t == nil || !t.Enabled {
		return base
	}
	return otelhttp.NewTransport(base,
		otelhttp.WithTracerProvider(t.Provider),
		otelhttp.WithPropagators(propagation.TraceContext{}),
		otelhttp.WithFilter(underSpan))
}

// underSpan reports whether r is made under a span (a valid span context
// in its context), the only requests the transport traces.
func underSpan(r *http.Request) bool {
	return trace.SpanContextFromContext(r.Context()).IsValid()
}

func samplerFrom(name, arg string) (sdktrace.Sampler, error) {
	ratio := func() (float64, error) {
		if arg == "" {
			return 1, nil
		}
		r, err := strconv.ParseFloat(arg, 64)
		if err != nil || r < 0 || r > 1 {
			return 0, fmt.Errorf("%s=%q: want a ratio between 0 and 1", EnvSamplerArg, arg)
		}
		return r, nil
	}
	switch strings.ToLower(name) {
	case "", "parentbased_always_on":
		return sdktrace.ParentBased(sdktrace.AlwaysSample()), nil
	case "always_on":
		return sdktrace.AlwaysSample(), nil
	case "always_off":
		return sdktrace.NeverSample(), nil
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample()), nil
	case "traceidratio":
		r, err := ratio()
		return sdktrace.TraceIDRatioBased(r), err
	case "parentbased_traceidratio":
		r, err := ratio()
		return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(r)), err
	}
	return nil, fmt.Errorf("%s=%q is not supported: want always_on, always_off, traceidratio or their parentbased_ forms", EnvSampler, name)
}

func parseBool(name, v string) (bool, error) {
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("%s=%q: want true or false", name, v)
	}
	return b, nil
}

func parseContent(v string) (bool, error) {
	switch v {
	case "", "0":
		return false, nil
	case "1":
		return true, nil
	}
	return false, errors.New(EnvContent + "=" + strconv.Quote(v) + ": want 1 (content in traces) or 0")
}

// redactURL keeps scheme, host and path (a bare host:port stays as it
// is): credentials may sit in userinfo
// or the query.
func redactURL(s string) string {
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok { // a gRPC host:port
		scheme, rest = "", s
	} else {
		scheme += "://"
	}
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		rest = rest[at+1:]
	}
	if q := strings.IndexAny(rest, "?#"); q >= 0 {
		rest = rest[:q]
	}
	return scheme + rest
}
