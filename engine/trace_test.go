package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/coretest"
	"github.com/marlowe-bot/marlowe/engine"
	"github.com/marlowe-bot/marlowe/internal/telemetry"
)

// marker is content that must never reach a span unless content tracing
// is on: it is in the message text, the tool arguments, the tool result
// and the model's answer.
const marker = "ZQX-private-7731"

// tracedRun runs one approved irreversible call with tracing on: a
// mention, a model step asking for wipe, a card approved 90 s later by
// Bob, the tool, and a final answer. It returns the spans and the run id.
func tracedRun(t *testing.T, content bool) ([]sdktrace.ReadOnlySpan, string, *harness) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tr := telemetry.New(sdktrace.NewSimpleSpanProcessor(exp), "test", nil)
	t.Cleanup(func() { _ = tr.Shutdown(t.Context()) })
	log := &toolLog{}
	m := coretest.NewScriptedModel(
		coretest.Calls(coretest.Call("c0", "probe", `{"q":"`+marker+`"}`), coretest.Call("c1", "wipe", `{"id":"`+marker+`"}`)),
		func(v core.View) (core.Reply, error) { return core.Reply{Text: "done: " + lastText(v)}, nil },
	)
	h := newHarness(t, m, []core.Tool{wipeTool(log), failingTool()}, platformAdmins(bob.ID), func(c *engine.Config) {
		c.Tracing = engine.Tracing{Provider: tr.Provider, Content: content, Model: "test-model"}
		c.Logger = slog.New(telemetry.LogHandler(c.Logger.Handler()))
	})
	ev := h.mention(alice, "C1", "please wipe "+marker)
	h.deliver(ev)
	h.idle()
	card, _ := cardOf(h)
	h.clk.Advance(90 * time.Second)
	h.click(bob, token(card, "approve"), threadOf(ev))
	h.idle()
	if got := log.get(); len(got) != 1 {
		t.Fatalf("executions = %v", got)
	}
	var run string
	for id := range h.runs("C1") {
		run = id
	}
	if err := tr.Provider.(*sdktrace.TracerProvider).ForceFlush(t.Context()); err != nil {
		t.Fatal(err)
	}
	return exp.GetSpans().Snapshots(), run, h
}

// failingTool is a read tool whose error quotes its argument, as a
// fetch's "GET <url>: ..." would.
func failingTool() core.Tool {
	return core.Tool{Name: "probe", Description: "probe", Consequence: core.Read,
		Schema: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}}}`),
		Run: func(ctx context.Context, tc core.ToolContext, args json.RawMessage) (core.Observation, error) {
			return core.Observation{}, fmt.Errorf("probe %s: refused", args)
		}}
}

func byName(spans []sdktrace.ReadOnlySpan, name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range spans {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

func attrOf(s sdktrace.ReadOnlySpan, key string) (attribute.Value, bool) {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

func TestTraceOfOneRunIsOneTreeWithGenAIAttributes(t *testing.T) {
	spans, run, h := tracedRun(t, false)
	if len(spans) == 0 {
		t.Fatal("no spans")
	}
	want := engine.RunTraceID(run)
	if engine.RunOfTrace(want) != run {
		t.Fatalf("trace id %s does not read back as run %s", want, run)
	}
	ids := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	for _, s := range spans {
		if s.SpanContext().TraceID() != want {
			t.Errorf("span %s in trace %s, want the run's %s", s.Name(), s.SpanContext().TraceID(), want)
		}
		ids[s.SpanContext().SpanID()] = s
	}
	// Every span with a parent has it in the trace: one connected tree per
	// piece of work, no dangling parents.
	for _, s := range spans {
		if p := s.Parent(); p.IsValid() {
			if _, ok := ids[p.SpanID()]; !ok {
				t.Errorf("span %s has a parent that is not in the trace", s.Name())
			}
		}
	}

	ing := byName(spans, "marlowe.ingress")
	if len(ing) != 1 {
		t.Fatalf("ingress spans = %d, want 1", len(ing))
	}
	for k, v := range map[string]string{"marlowe.platform": platform, "marlowe.channel.kind": "public", "marlowe.route.reason": "mention", "marlowe.ingress.outcome": "started", "marlowe.run.id": run} {
		if got, _ := attrOf(ing[0], k); got.AsString() != v {
			t.Errorf("ingress %s = %q, want %q", k, got.AsString(), v)
		}
	}
	if seq, ok := attrOf(ing[0], "marlowe.journal.seq"); !ok || seq.AsInt64() <= 0 {
		t.Errorf("ingress has no journal seq: %v", seq)
	}

	clicks := byName(spans, "marlowe.click")
	if len(clicks) != 1 {
		t.Fatalf("click spans = %d, want 1", len(clicks))
	}
	for k, v := range map[string]string{"marlowe.ingress.outcome": "accepted", "marlowe.approval.decision": "approved", "marlowe.run.id": run} {
		if got, _ := attrOf(clicks[0], k); got.AsString() != v {
			t.Errorf("click %s = %q, want %q", k, got.AsString(), v)
		}
	}
	drives := byName(spans, "marlowe.run")
	if len(drives) != 2 {
		t.Errorf("drive spans = %d, want 2 (parked at the card, resumed by the click)", len(drives))
	}
	models := byName(spans, "chat test-model")
	if len(models) != 2 {
		t.Fatalf("model spans = %d, want 2", len(models))
	}
	m := models[0]
	if m.SpanKind() != trace.SpanKindClient {
		t.Errorf("model span kind = %v", m.SpanKind())
	}
	for k, v := range map[string]string{"gen_ai.operation.name": "chat", "gen_ai.request.model": "test-model", "gen_ai.response.model": "scripted", "gen_ai.provider.name": "scripted"} {
		if got, _ := attrOf(m, k); got.AsString() != v {
			t.Errorf("model %s = %q, want %q", k, got.AsString(), v)
		}
	}
	if in, _ := attrOf(m, "gen_ai.usage.input_tokens"); in.AsInt64() != 100 {
		t.Errorf("input tokens = %v", in.AsInt64())
	}
	if out, _ := attrOf(m, "gen_ai.usage.output_tokens"); out.AsInt64() != 20 {
		t.Errorf("output tokens = %v", out.AsInt64())
	}
	if fr, _ := attrOf(m, "gen_ai.response.finish_reasons"); fmt.Sprint(fr.AsStringSlice()) != "[tool_calls]" {
		t.Errorf("finish reasons = %v", fr.AsStringSlice())
	}
	if fr, _ := attrOf(models[1], "gen_ai.response.finish_reasons"); fmt.Sprint(fr.AsStringSlice()) != "[stop]" {
		t.Errorf("final finish reasons = %v", fr.AsStringSlice())
	}
	if _, ok := ids[m.Parent().SpanID()]; !ok || ids[m.Parent().SpanID()].Name() != "marlowe.run" {
		t.Errorf("model span's parent is not a drive span")
	}

	if p := byName(spans, "execute_tool probe"); len(p) != 1 || p[0].Status().Code != codes.Error {
		t.Errorf("failed tool's span = %v", p)
	} else if et, _ := attrOf(p[0], "error.type"); et.AsString() != "tool_error" {
		t.Errorf("failed tool's error.type = %q", et.AsString())
	}
	tools := byName(spans, "execute_tool wipe")
	if len(tools) != 1 {
		t.Fatalf("tool spans = %d", len(tools))
	}
	for k, v := range map[string]string{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "wipe", "gen_ai.tool.call.id": "c1", "marlowe.tool.consequence": "irreversible", "marlowe.gate.verdict": "approved"} {
		if got, _ := attrOf(tools[0], k); got.AsString() != v {
			t.Errorf("tool %s = %q, want %q", k, got.AsString(), v)
		}
	}

	var requested, resolved bool
	for _, d := range drives {
		for _, ev := range d.Events() {
			switch ev.Name {
			case "marlowe.approval.requested":
				requested = true
			case "marlowe.approval.resolved":
				resolved = true
				for _, kv := range ev.Attributes {
					if kv.Key == "marlowe.approval.wait_seconds" && kv.Value.AsFloat64() != 90 {
						t.Errorf("approval wait = %v, want 90", kv.Value.AsFloat64())
					}
					if kv.Key == "marlowe.approval.decision" && kv.Value.AsString() != "approved" {
						t.Errorf("decision = %v", kv.Value.AsString())
					}
				}
			}
		}
	}
	if !requested || !resolved {
		t.Errorf("approval events: requested %v, resolved %v", requested, resolved)
	}
	if len(byName(spans, "marlowe.post")) == 0 {
		t.Error("no post spans")
	}
	// Journal appends are events on the span they happened under, with
	// the seqs they got: the model.step and tool.completed of the run.
	appended := map[string]bool{}
	for _, sp := range spans {
		for _, ev := range sp.Events() {
			if ev.Name != "marlowe.journal.append" {
				continue
			}
			var seq int64
			var kinds []string
			for _, kv := range ev.Attributes {
				switch kv.Key {
				case "marlowe.journal.seq":
					seq = kv.Value.AsInt64()
				case "marlowe.journal.kinds":
					kinds = kv.Value.AsStringSlice()
				}
			}
			if seq <= 0 {
				t.Errorf("append event on %s without its seq", sp.Name())
			}
			for _, k := range kinds {
				appended[k] = true
			}
		}
	}
	for _, k := range []string{"model.step", "tool.requested", "tool.completed", "message.posted", "run.completed"} {
		if !appended[k] {
			t.Errorf("no append event for %s (got %v)", k, appended)
		}
	}
	// Logs of a traced run carry its trace id: a run's end leads to its trace.
	for _, msg := range []string{`msg="approval requested"`, `msg="run completed"`} {
		found := false
		for line := range strings.Lines(h.logs.String()) {
			if strings.Contains(line, msg) {
				found = true
				if !strings.Contains(line, "trace_id="+want.String()) {
					t.Errorf("log line without the run's trace id: %s", line)
				}
			}
		}
		if !found {
			t.Errorf("no %s log line", msg)
		}
	}
}

// TestAttackContentNeverReachesSpansWithoutOptIn puts a marker in the
// message, the tool's arguments and result and the model's answer, and
// checks it appears in no attribute and no event of any span; with
// MARLOWE_TRACE_CONTENT on it does appear (the check can see it).
func TestAttackContentNeverReachesSpansWithoutOptIn(t *testing.T) {
	leaks := func(spans []sdktrace.ReadOnlySpan) []string {
		var out []string
		check := func(where string, kvs []attribute.KeyValue) {
			for _, kv := range kvs {
				if strings.Contains(kv.Value.Emit(), marker) {
					out = append(out, where+" "+string(kv.Key))
				}
			}
		}
		for _, s := range spans {
			if strings.Contains(s.Name(), marker) {
				out = append(out, "name of "+s.Name())
			}
			check(s.Name(), s.Attributes())
			for _, ev := range s.Events() {
				check(s.Name()+"/"+ev.Name, ev.Attributes)
			}
			if strings.Contains(s.Status().Description, marker) {
				out = append(out, s.Name()+" status")
			}
		}
		return out
	}
	spans, _, _ := tracedRun(t, false)
	if l := leaks(spans); len(l) > 0 {
		t.Errorf("content in spans without the opt-in: %v", l)
	}
	spans, _, _ = tracedRun(t, true)
	got := strings.Join(leaks(spans), ",")
	for _, want := range []string{"exception.message", "marlowe.message.text", "gen_ai.tool.call.arguments", "gen_ai.tool.call.result", "gen_ai.output.messages", "gen_ai.input.messages"} {
		if !strings.Contains(got, want) {
			t.Errorf("with the opt-in, %s does not carry the content (found: %s)", want, got)
		}
	}
}

// startCounter is a tracer provider that notes the name of every span
// started through it, sampled or not, before the SDK decides.
type startCounter struct {
	trace.TracerProvider
	mu    sync.Mutex
	names []string
}

func (c *startCounter) Tracer(name string, opts ...trace.TracerOption) trace.Tracer {
	return countingTracer{c.TracerProvider.Tracer(name, opts...), c}
}

func (c *startCounter) started() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.names)
}

type countingTracer struct {
	trace.Tracer
	c *startCounter
}

func (t countingTracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	t.c.mu.Lock()
	t.c.names = append(t.c.names, name)
	t.c.mu.Unlock()
	return t.Tracer.Start(ctx, name, opts...)
}

// TestUnsampledRunStartsOnlyItsRoots: a run the sampler leaves out
// (OTEL_TRACES_SAMPLER=parentbased_traceidratio, most runs) asks the SDK
// for its root spans only (the ingress, the drive), where the sampler
// decides; none for its model calls, tool calls, posts and edits, which
// would be non-recording spans and contexts made for nothing. A sampled
// run starts all of them.
func TestUnsampledRunStartsOnlyItsRoots(t *testing.T) {
	for _, c := range []struct {
		name    string
		sampler sdktrace.Sampler
		want    []string
	}{
		{"unsampled", sdktrace.ParentBased(sdktrace.NeverSample()), []string{"marlowe.ingress", "marlowe.run"}},
		{"sampled", sdktrace.ParentBased(sdktrace.AlwaysSample()), []string{"chat test-model", "execute_tool note", "marlowe.edit", "marlowe.ingress", "marlowe.post", "marlowe.run"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			exp := tracetest.NewInMemoryExporter()
			tr := telemetry.New(sdktrace.NewSimpleSpanProcessor(exp), "test", c.sampler)
			t.Cleanup(func() { _ = tr.Shutdown(context.Background()) })
			counter := &startCounter{TracerProvider: tr.Provider}
			log := &toolLog{}
			m := coretest.NewScriptedModel(coretest.Calls(coretest.Call("c1", "note", `{"text":"x"}`)), coretest.Text("done"))
			h := newHarness(t, m, []core.Tool{noteTool(log)}, func(cfg *engine.Config) {
				cfg.Tracing = engine.Tracing{Provider: counter, Model: "test-model"}
			})
			h.deliver(h.mention(alice, "C1", "go"))
			h.idle()
			if got := log.get(); len(got) != 1 {
				t.Fatalf("executions = %v", got)
			}
			got := counter.started()
			slices.Sort(got)
			if got = slices.Compact(got); !slices.Equal(got, c.want) {
				t.Errorf("spans started = %v, want %v", got, c.want)
			}
		})
	}
}
