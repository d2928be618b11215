package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"go.yaml.in/yaml/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/marlowe-bot/marlowe/engine"
	"github.com/marlowe-bot/marlowe/llm/llmtest"
)

var metricName = regexp.MustCompile(`\bmarlowe_[a-z0-9_]+`)

// connectorMetrics are exported once a connector has been called (series
// per server and tool); the test checks they are defined in connectors.go.
var connectorMetricNames = map[string]string{
	"marlowe_connector_calls_total":         "marlowe_connector_calls_total",
	"marlowe_connector_errors_total":        "marlowe_connector_errors_total",
	"marlowe_connector_call_seconds_bucket": "marlowe_connector_call_seconds",
}

// discordOnly are exported only when Discord is configured (its durable
// delivery retry queue); the test checks they are defined in metrics.go.
var discordOnly = map[string]bool{
	"marlowe_delivery_queue_pending":        true,
	"marlowe_delivery_queue_oldest_seconds": true,
	"marlowe_delivery_retries_total":        true,
}

type dashboard struct {
	Title  string `json:"title"`
	Panels []struct {
		Type    string `json:"type"`
		Title   string `json:"title"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

type alertRules struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

// TestDashboardAndAlertsNameExportedMetrics loads deploy/'s Grafana
// dashboard and alert rules and checks every query against the metric
// names a running serve exports on /metrics (after one run, so that series
// which appear with their first event are there).
func TestDashboardAndAlertsNameExportedMetrics(t *testing.T) {
	t.Parallel()
	b := startQA(t, qaOpts{env: map[string]string{"MARLOWE_MODEL_PRICES": "fake-model=1/2"}})
	b.slack.RateLimit("chat.postMessage", 1, time.Second)
	b.model.Enqueue(llmtest.Text("dashkiwi answer"))
	b.slack.Say(qaGeneral, "", qaAlice, b.mention+" a question")
	b.waitPostFor(15*time.Second, "the answer", hasText("dashkiwi answer"))
	b.waitLog("run completed")
	samples := scrape(t, b.readyAddr())
	exported := map[string]bool{}
	spend := 0.0
	for k, v := range samples {
		name, _, _ := strings.Cut(k, "{")
		exported[name] = true
		if name == "marlowe_model_spend_total" {
			spend += v
		}
	}
	// MARLOWE_MODEL_PRICES reached the engine: the run's tokens were priced.
	if spend <= 0 {
		t.Errorf("estimated spend after a priced run = %v", spend)
	}
	var raw []byte
	src, err := os.ReadFile("metrics.go")
	if err != nil {
		t.Fatal(err)
	}
	for n := range discordOnly {
		if !bytes.Contains(src, []byte(`"`+n+`"`)) {
			t.Errorf("%s is not defined in metrics.go", n)
		}
		exported[n] = true
	}
	csrc, err := os.ReadFile("connectors.go")
	if err != nil {
		t.Fatal(err)
	}
	for n, def := range connectorMetricNames {
		if !bytes.Contains(csrc, []byte(`"`+def+`"`)) {
			t.Errorf("%s is not defined in connectors.go", def)
		}
		exported[n] = true
	}
	check := func(where, expr string) {
		names := metricName.FindAllString(expr, -1)
		if len(names) == 0 {
			t.Errorf("%s: query %q names no marlowe metric", where, expr)
		}
		for _, n := range names {
			if !exported[n] {
				t.Errorf("%s: %s is not exported by the bot", where, n)
			}
		}
	}

	raw, err = os.ReadFile("../../deploy/grafana/dashboards/marlowe.json")
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("dashboard JSON: %v", err)
	}
	panels := 0
	for _, p := range d.Panels {
		if p.Type == "row" {
			continue
		}
		panels++
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			check("panel "+p.Title, tg.Expr)
		}
	}
	if panels < 20 {
		t.Errorf("dashboard has %d panels; the check no longer reads them", panels)
	}

	raw, err = os.ReadFile("../../deploy/prometheus/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	var rules alertRules
	if err := yaml.Unmarshal(raw, &rules); err != nil {
		t.Fatalf("alert rules YAML: %v", err)
	}
	var alerts []string
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			alerts = append(alerts, r.Alert)
			if r.Labels["severity"] == "" || r.Annotations["summary"] == "" || r.For == "" {
				t.Errorf("alert %s lacks severity, summary or for", r.Alert)
			}
			if _, err := time.ParseDuration(r.For); err != nil {
				t.Errorf("alert %s: for %q: %v", r.Alert, r.For, err)
			}
			check("alert "+r.Alert, r.Expr)
		}
	}
	want := []string{"MarloweAckSlow", "MarloweConnectorDown", "MarloweJournalAppendErrors", "MarloweLeasesFlapping", "MarloweModelFailingOver", "MarloweRunsFailing"}
	if slices.Sort(alerts); !slices.Equal(alerts, want) {
		t.Errorf("alerts = %v, want %v", alerts, want)
	}
}

// TestAlertRulesWithPromtool runs promtool's syntax check and the rules'
// unit tests (deploy/prometheus/alerts_test.yml: each alert fires on the
// series that should raise it, none on a healthy replica). It needs
// promtool (Debian: apt-get install prometheus); without it the YAML and
// metric-name checks above are what runs.
func TestAlertRulesWithPromtool(t *testing.T) {
	t.Parallel()
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool not installed (apt-get install prometheus)")
	}
	for _, args := range [][]string{{"check", "rules", "alerts.yml"}, {"test", "rules", "alerts_test.yml"}} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = "../../deploy/prometheus"
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// otlpReceiver is an OTLP trace endpoint decoding each export with the
// collector's protobuf types: over HTTP (ServeHTTP) and over gRPC (Export,
// the collector's generated TraceServiceServer).
type otlpReceiver struct {
	collectortrace.UnimplementedTraceServiceServer
	mu    sync.Mutex
	spans []*tracepb.Span
	svc   string
}

func (r *otlpReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	b, err := io.ReadAll(req.Body)
	if err != nil || req.URL.Path != "/v1/traces" {
		http.Error(w, "bad export", http.StatusBadRequest)
		return
	}
	var m collectortrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(b, &m); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.add(&m)
	out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func (r *otlpReceiver) Export(_ context.Context, m *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	r.add(m)
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

func (r *otlpReceiver) add(m *collectortrace.ExportTraceServiceRequest) {
	r.mu.Lock()
	for _, rs := range m.ResourceSpans {
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.Key == "service.name" {
				r.svc = kv.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.ScopeSpans {
			r.spans = append(r.spans, ss.Spans...)
		}
	}
	r.mu.Unlock()
}

// TestTraceOfARunReachesAnOTLPReceiver runs serve with the standard OTLP
// variables pointing at a receiver in the test, over OTLP/HTTP and over
// OTLP/gRPC (the collector's generated trace service on a local gRPC
// server): after one run and a shutdown (which flushes), the receiver
// holds the run's trace under the configured service name, its id is the
// run's id (so `bot replay --run` finds it), the model call carried its
// traceparent, and the message's text is in no attribute.
func TestTraceOfARunReachesAnOTLPReceiver(t *testing.T) {
	t.Parallel()
	for _, protocol := range []string{"http/protobuf", "grpc"} {
		t.Run(protocol, func(t *testing.T) { traceOfARunReachesAnOTLPReceiver(t, protocol) })
	}
}

func traceOfARunReachesAnOTLPReceiver(t *testing.T, protocol string) {
	rcv := &otlpReceiver{}
	otel := map[string]string{"OTEL_SERVICE_NAME": "marlowe-qa", "OTEL_EXPORTER_OTLP_PROTOCOL": protocol}
	if protocol == "grpc" {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		gs := grpc.NewServer()
		collectortrace.RegisterTraceServiceServer(gs, rcv)
		go func() { _ = gs.Serve(lis) }()
		defer gs.Stop()
		otel["OTEL_EXPORTER_OTLP_ENDPOINT"] = "http://" + lis.Addr().String()
	} else {
		srv := httptest.NewServer(rcv)
		defer srv.Close()
		otel["OTEL_EXPORTER_OTLP_ENDPOINT"] = srv.URL
	}
	const secret = "otlpkiwi-private-words"
	b := startQA(t, qaOpts{env: otel})
	b.model.Enqueue(llmtest.Tools(llmtest.Call("c1", "recall", `{"query":"`+secret+`"}`)), llmtest.Text("otlpkiwi answer"))
	b.slack.Say(qaGeneral, "", qaAlice, b.mention+" "+secret)
	b.waitPostFor(15*time.Second, "the answer", hasText("otlpkiwi answer"))
	b.waitLog("run completed")
	m := regexp.MustCompile(`msg="run started" run=(\S+)`).FindStringSubmatch(b.logs.String())
	if m == nil {
		t.Fatalf("no run id in the logs:\n%s", b.logs.String())
	}
	run := m[1]
	b.stop() // flushes the exporter

	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	if rcv.svc != "marlowe-qa" {
		t.Errorf("service.name = %q", rcv.svc)
	}
	want := engine.RunTraceID(run)
	byID := map[string]*tracepb.Span{}
	names := map[string]int{}
	for _, s := range rcv.spans {
		if !bytes.Equal(s.TraceId, want[:]) {
			continue
		}
		byID[hex.EncodeToString(s.SpanId)] = s
		names[s.Name]++
		for _, kv := range s.Attributes {
			if strings.Contains(kv.GetValue().String(), secret) {
				t.Errorf("span %s attribute %s carries the message text", s.Name, kv.Key)
			}
		}
		for _, ev := range s.Events {
			for _, kv := range ev.Attributes {
				if strings.Contains(kv.GetValue().String(), secret) {
					t.Errorf("span %s event %s attribute %s carries the message text", s.Name, ev.Name, kv.Key)
				}
			}
		}
	}
	t.Logf("the run's trace (trace id %s, run %s):\n%s", hex.EncodeToString(want[:]), run, spanTree(byID))
	if got := engine.RunOfTrace(trace.TraceID(want)); got != run {
		t.Errorf("trace id reads back as %s, want run %s", got, run)
	}
	// The trace id leads to the run: `bot replay --run <trace id>`.
	out, err := runBot(t, env(map[string]string{"MARLOWE_DATA_DIR": b.dir}), "", "replay", "--run", hex.EncodeToString(want[:]))
	if err != nil || !strings.Contains(out, `"id": "`+run+`"`) {
		t.Errorf("replay --run <trace id> = %v\n%s", err, out)
	}
	appends := 0
	for _, s := range byID {
		for _, ev := range s.Events {
			if ev.Name == "marlowe.journal.append" {
				appends++
			}
		}
	}
	if appends == 0 {
		t.Error("no journal append events in the run's trace")
	}
	for _, n := range []string{"marlowe.ingress", "marlowe.run", "chat fake-model", "execute_tool recall", "marlowe.post"} {
		if names[n] == 0 {
			t.Errorf("no %s span in the run's trace; got %v", n, slices.Sorted(maps.Keys(names)))
		}
	}
	// The model HTTP call is a client span under the chat span, and the
	// request carried that span's trace context.
	var httpSpan *tracepb.Span
	for _, s := range byID {
		if p := byID[hex.EncodeToString(s.ParentSpanId)]; p != nil && p.Name == "chat fake-model" && s.Kind == tracepb.Span_SPAN_KIND_CLIENT {
			httpSpan = s
		}
	}
	if httpSpan == nil {
		t.Fatalf("no HTTP client span under the model call; spans %v", names)
	}
	var sent []string
	for _, r := range b.model.Requests() {
		sent = append(sent, r.Header.Get("traceparent"))
	}
	tp := "00-" + hex.EncodeToString(want[:]) + "-" + hex.EncodeToString(httpSpan.SpanId) + "-01"
	if !slices.Contains(sent, tp) {
		t.Errorf("model requests carried traceparent %v, want %s", sent, tp)
	}
}

// processCPU is the process's user and system CPU time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchOTLP starts an OTLP/HTTP endpoint that drops every export unread
// (decoding is the collector's work, not the bot's) and returns its base
// URL (OTEL_EXPORTER_OTLP_ENDPOINT).
func benchOTLP(b *testing.B) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK) // an empty ExportTraceServiceResponse
	}))
	b.Cleanup(srv.Close)
	return srv.URL
}

// spanTree renders a trace as text: one line per span, children indented
// under their parent, with its duration, its attributes and its events
// (docs/operations.md shows one).
func spanTree(byID map[string]*tracepb.Span) string {
	kids := map[string][]*tracepb.Span{}
	var roots []*tracepb.Span
	for _, s := range byID {
		if p := hex.EncodeToString(s.ParentSpanId); byID[p] != nil {
			kids[p] = append(kids[p], s)
		} else {
			roots = append(roots, s)
		}
	}
	byStart := func(a, b *tracepb.Span) int { return int(a.StartTimeUnixNano>>10) - int(b.StartTimeUnixNano>>10) }
	var sb strings.Builder
	var walk func(s *tracepb.Span, depth int)
	walk = func(s *tracepb.Span, depth int) {
		pad := strings.Repeat("  ", depth)
		ms := float64(s.EndTimeUnixNano-s.StartTimeUnixNano) / 1e6
		var attrs []string
		for _, kv := range s.Attributes {
			attrs = append(attrs, kv.Key+"="+anyValue(kv.GetValue()))
		}
		slices.Sort(attrs)
		kind := strings.TrimPrefix(s.Kind.String(), "SPAN_KIND_")
		fmt.Fprintf(&sb, "%s%s [%s %.1f ms] %s\n", pad, s.Name, strings.ToLower(kind), ms, strings.Join(attrs, " "))
		for _, ev := range s.Events {
			var ea []string
			for _, kv := range ev.Attributes {
				ea = append(ea, kv.Key+"="+anyValue(kv.GetValue()))
			}
			slices.Sort(ea)
			fmt.Fprintf(&sb, "%s  · %s %s\n", pad, ev.Name, strings.Join(ea, " "))
		}
		ks := kids[hex.EncodeToString(s.SpanId)]
		slices.SortFunc(ks, byStart)
		for _, k := range ks {
			walk(k, depth+1)
		}
	}
	slices.SortFunc(roots, byStart)
	for _, r := range roots {
		walk(r, 0)
	}
	return sb.String()
}

func anyValue(v *commonpb.AnyValue) string {
	switch x := v.Value.(type) {
	case *commonpb.AnyValue_StringValue:
		return strconv.Quote(x.StringValue)
	case *commonpb.AnyValue_IntValue:
		return strconv.FormatInt(x.IntValue, 10)
	case *commonpb.AnyValue_BoolValue:
		return strconv.FormatBool(x.BoolValue)
	case *commonpb.AnyValue_DoubleValue:
		return strconv.FormatFloat(x.DoubleValue, 'f', -1, 64)
	case *commonpb.AnyValue_ArrayValue:
		var parts []string
		for _, e := range x.ArrayValue.Values {
			parts = append(parts, anyValue(e))
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	return v.String()
}
