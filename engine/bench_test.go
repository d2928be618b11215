package engine_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/coretest"
	"github.com/marlowe-bot/marlowe/core/gate"
	"github.com/marlowe-bot/marlowe/engine"
)

func benchEngine(b *testing.B, m core.Model, s *coretest.FakeSurface, budgets engine.Budgets, tools ...core.Tool) *engine.Engine {
	return benchEngineWith(b, m, s, func(c *engine.Config) { c.Budgets = budgets }, tools...)
}

// benchEngineWith is benchEngine with opt editing the config.
func benchEngineWith(b *testing.B, m core.Model, s *coretest.FakeSurface, opt func(*engine.Config), tools ...core.Tool) *engine.Engine {
	b.Helper()
	_, signer := b, coretest.NewSigner(b)
	reg, err := gate.NewRegistry(tools...)
	if err != nil {
		b.Fatal(err)
	}
	cfg := engine.Config{
		Journal: coretest.NewMemJournal(signer), Boundary: core.NewBoundary(nil), Model: m, Tools: reg,
		Surfaces: map[string]core.Surface{platform: s},
		Router:   core.RouterFunc(func(context.Context, core.Event) (bool, string, error) { return true, "mention", nil }),
		CardKey:  cardKey, Logger: slog.New(slog.DiscardHandler),
	}
	opt(&cfg)
	e, err := engine.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	if err := e.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = e.Close() })
	return e
}

// stepModel answers instantly: a note call until the run has taken
// stepsPerRun steps, then a final text.
type stepModel struct{}

const stepsPerRun = 10

func (stepModel) Step(ctx context.Context, v core.View) (core.Reply, error) {
	n := 0
	for _, m := range v.Messages {
		if m.Role == core.RoleAssistant {
			n++
		}
	}
	if n >= stepsPerRun {
		return core.Reply{Text: "done", Usage: core.Usage{InputTokens: 10}}, nil
	}
	return core.Reply{ToolCalls: []core.ToolCall{{Name: "note", Args: `{"text":"step"}`}}, Usage: core.Usage{InputTokens: 10}}, nil
}

// BenchmarkStep measures the harness's own cost per loop iteration, the
// model excluded (it answers instantly): budget check, view assembly,
// journaling model.step, validation, gate, tool.requested /
// permission.decided / tool.completed, the (trivial) tool and the checklist
// edit, plus each run's start, acknowledgement and completion amortised over
// its steps. One op = one model step; runs are stepsPerRun+1 steps long.
func BenchmarkStep(b *testing.B) {
	s := coretest.NewFakeSurface(platform, botID)
	e := benchEngine(b, stepModel{}, s, engine.Budgets{MaxSteps: 100, MaxTokens: 1 << 40, MaxWall: time.Hour}, noteTool(&toolLog{}))
	runs := (b.N + stepsPerRun) / (stepsPerRun + 1)
	b.ResetTimer()
	for i := range runs {
		ev := core.Event{Scope: chanScope("C1"), Visibility: core.Public, MessageID: fmt.Sprintf("M%d", i), Author: alice, Text: "go", MentionsBot: true}
		if err := e.Deliver(context.Background(), core.Inbound{Event: &ev}); err != nil {
			b.Fatal(err)
		}
		if err := e.WaitIdle(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(runs*(stepsPerRun+1)), "ns/step")
}

// BenchmarkAck measures routed event → acknowledgement (the checklist post
// in the thread) with a scripted model, and reports the p99.
func BenchmarkAck(b *testing.B) {
	s := coretest.NewFakeSurface(platform, botID)
	acked := make(chan time.Time, 1)
	s.FailPost = func(out core.Outbound) error {
		if len(out.Text) > 0 && out.Card == nil && out.Priority == core.PriorityNormal {
			select {
			case acked <- time.Now():
			default:
			}
		}
		return nil
	}
	e := benchEngine(b, coretest.NewScriptedModel(coretest.Text("ok")), s, engine.Budgets{})
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		ev := core.Event{Scope: chanScope("C1"), Visibility: core.Public, MessageID: fmt.Sprintf("M%d", i), Author: alice, Text: "hi", MentionsBot: true}
		start := time.Now()
		if err := e.Deliver(context.Background(), core.Inbound{Event: &ev}); err != nil {
			b.Fatal(err)
		}
		at := <-acked
		lat = append(lat, at.Sub(start))
	}
	b.StopTimer()
	_ = e.WaitIdle(context.Background())
	slices.Sort(lat)
	p := func(q float64) float64 { return float64(lat[int(q*float64(len(lat)-1))].Microseconds()) }
	b.ReportMetric(p(0.50), "p50-µs")
	b.ReportMetric(p(0.99), "p99-µs")
}
