package main

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/proto"

	"github.com/marlowe-bot/marlowe/engine"
	"github.com/marlowe-bot/marlowe/llm/llmtest"
)

var metricName = regexp.MustCompile(`\bmarlowe_[a-z0-9_]+`)

// pendingMetrics are exported by parts not merged on this branch yet:
// the connectors (issue 33) define them on their branch.
var pendingMetrics = map[string]bool{
	"marlowe_connector_calls_total":         true,
	"marlowe_connector_errors_total":        true,
	"marlowe_connector_call_seconds_bucket": true,
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
	check := func(where, expr string) {
		names := metricName.FindAllString(expr, -1)
		if len(names) == 0 {
			t.Errorf("%s: query %q names no marlowe metric", where, expr)
		}
		for _, n := range names {
			if !exported[n] && !pendingMetrics[n] {
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

// otlpReceiver is an OTLP/HTTP trace endpoint decoding each export with
// the collector's protobuf types.
type otlpReceiver struct {
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
	out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// TestTraceOfARunReachesAnOTLPReceiver runs serve with the standard OTLP
// variables pointing at a receiver in the test: after one run and a
// shutdown (which flushes), the receiver holds the run's trace, its id is
// the run's id (so `bot replay --run` finds it), the model call carried
// its traceparent, and the message's text is in no attribute.
func TestTraceOfARunReachesAnOTLPReceiver(t *testing.T) {
	t.Parallel()
	rcv := &otlpReceiver{}
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	const secret = "otlpkiwi-private-words"
	b := startQA(t, qaOpts{env: map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": srv.URL,
		"OTEL_SERVICE_NAME":           "marlowe-qa",
	}})
	b.model.Enqueue(llmtest.Text("otlpkiwi answer"))
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
	}
	if got := engine.RunOfTrace(trace.TraceID(want)); got != run {
		t.Errorf("trace id reads back as %s, want run %s", got, run)
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
	for _, n := range []string{"marlowe.ingress", "marlowe.run", "chat fake-model", "marlowe.post"} {
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
