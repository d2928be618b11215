package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/marlowe-bot/marlowe/connectors"
	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/coretest"
	"github.com/marlowe-bot/marlowe/engine"
	"github.com/marlowe-bot/marlowe/internal/telemetry"
)

// records is a slog handler keeping every record with its attributes.
type records struct {
	mu   sync.Mutex
	recs []map[string]string
}

func (r *records) Enabled(context.Context, slog.Level) bool { return true }
func (r *records) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *records) WithGroup(string) slog.Handler            { return r }
func (r *records) Handle(_ context.Context, rec slog.Record) error {
	m := map[string]string{"msg": rec.Message, "level": rec.Level.String()}
	rec.Attrs(func(a slog.Attr) bool {
		m[a.Key] = a.Value.String()
		return true
	})
	r.mu.Lock()
	r.recs = append(r.recs, m)
	r.mu.Unlock()
	return nil
}

func (r *records) find(msg string) []map[string]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []map[string]string
	for _, m := range r.recs {
		if m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

// TestConnectorWarningCarriesTheRunsTrace: a run with tracing on calls a
// connector's tool and the MCP server (go-sdk's, over streamable HTTP)
// refuses the call; the connectors' warning about it is logged with the
// call's context, so it carries the run's trace id (and the execute_tool
// span's id): the log line leads to the trace and to `bot replay --run`.
func TestConnectorWarningCarriesTheRunsTrace(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "lookup", InputSchema: json.RawMessage(`{"type":"object"}`), Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
		})
	srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "tools/call" {
				return nil, errors.New("backend unavailable")
			}
			return next(ctx, method, req)
		}
	})
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	defer hs.Close()

	rec := &records{}
	log := slog.New(telemetry.LogHandler(rec))
	m := connectors.New(&connectors.Config{File: "t.json", Servers: []connectors.Server{{Name: "h", Type: connectors.HTTP, URL: hs.URL, Timeout: time.Minute}}},
		connectors.Options{Logger: log})
	m.Start(t.Context())
	defer m.Close()
	if err := m.WaitReady(t.Context()); err != nil {
		t.Fatal(err)
	}
	tool, ok := m.Tool("h__lookup")
	if !ok {
		t.Fatalf("no h__lookup: %+v", m.States())
	}

	exp := tracetest.NewInMemoryExporter()
	tr := telemetry.New(sdktrace.NewSimpleSpanProcessor(exp), "test", nil)
	defer tr.Shutdown(context.Background())
	model := coretest.NewScriptedModel(
		coretest.Calls(coretest.Call("c0", "h__lookup", `{}`)),
		func(v core.View) (core.Reply, error) { return core.Reply{Text: "could not look it up"}, nil },
	)
	h := newHarness(t, model, []core.Tool{tool}, func(c *engine.Config) {
		c.Tracing = engine.Tracing{Provider: tr.Provider, Model: "test-model"}
		c.Logger = log
	})
	h.deliver(h.mention(alice, "C1", "look it up"))
	h.idle()
	var run string
	for id := range h.runs("C1") {
		run = id
	}
	if run == "" {
		t.Fatal("no run")
	}
	want := engine.RunTraceID(run).String()
	warns := rec.find("connector call failed")
	if len(warns) != 1 {
		t.Fatalf("connector warnings = %v, want one", warns)
	}
	w := warns[0]
	if w["trace_id"] != want || w["outcome"] != "error" || w["tool"] != "lookup" || w["server"] != "h" {
		t.Fatalf("warning = %v, want trace_id %s (run %s), outcome error", w, want, run)
	}
	// Its span is the tool call's.
	spans := exp.GetSpans().Snapshots()
	if !slices.ContainsFunc(spans, func(s sdktrace.ReadOnlySpan) bool {
		return s.Name() == "execute_tool h__lookup" && s.SpanContext().SpanID().String() == w["span_id"]
	}) {
		t.Errorf("span_id %s is not the execute_tool span's", w["span_id"])
	}
}
