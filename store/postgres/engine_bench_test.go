package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/coretest"
	"github.com/marlowe-bot/marlowe/core/gate"
	"github.com/marlowe-bot/marlowe/engine"
	"github.com/marlowe-bot/marlowe/internal/testpg"
)

// gapModel answers instantly and records, for each call after a run's
// first, the time since its previous answer: with an instant model and an
// instant tool, that gap is the harness's own overhead for one step
// (journal appends on Postgres, gate, view assembly, checklist edit).
type gapModel struct {
	steps int

	mu   sync.Mutex
	last time.Time
	gaps []time.Duration
}

func (m *gapModel) Step(_ context.Context, v core.View) (core.Reply, error) {
	n := 0
	for _, msg := range v.Messages {
		if msg.Role == core.RoleAssistant {
			n++
		}
	}
	m.mu.Lock()
	if n > 0 {
		m.gaps = append(m.gaps, time.Since(m.last))
	}
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		m.last = time.Now()
		m.mu.Unlock()
	}()
	if n >= m.steps {
		return core.Reply{Text: "done", Usage: core.Usage{InputTokens: 10}}, nil
	}
	return core.Reply{ToolCalls: []core.ToolCall{{ID: fmt.Sprintf("c%d", n), Name: "note", Args: `{"text":"step"}`}}, Usage: core.Usage{InputTokens: 10}}, nil
}

// BenchmarkEngineStepPostgres reports the harness overhead per model step,
// model excluded, with the journal on Postgres (durable commits): p50 and
// p99 of the gap between one model answer and the next model call.
func BenchmarkEngineStepPostgres(b *testing.B) {
	url := testpg.Pooled(testpg.New(b), 8)
	j := open(b, url, coretest.NewSigner(b))
	note := core.Tool{
		Name: "note", Description: "Take a note.", Consequence: core.Write,
		Schema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`),
		Run: func(context.Context, core.ToolContext, json.RawMessage) (core.Observation, error) {
			return core.Observation{Text: "noted", Trust: core.Trusted}, nil
		},
	}
	reg, err := gate.NewRegistry(note)
	if err != nil {
		b.Fatal(err)
	}
	if reg, err = reg.WithDefault("note"); err != nil {
		b.Fatal(err)
	}
	const steps = 10
	m := &gapModel{steps: steps}
	s := coretest.NewFakeSurface("slack", "UBOT")
	e, err := engine.New(engine.Config{
		Journal: j, Boundary: core.NewBoundary(nil), Model: m, Tools: reg,
		Surfaces: map[string]core.Surface{"slack": s},
		Router:   core.RouterFunc(func(context.Context, core.Event) (bool, string, error) { return true, "mention", nil }),
		CardKey:  []byte("bench-card-key-0123456789abcdef"),
		Budgets:  engine.Budgets{MaxSteps: 100, MaxTokens: 1 << 40, MaxWall: time.Hour},
		Logger:   slog.New(slog.DiscardHandler),
	})
	if err != nil {
		b.Fatal(err)
	}
	ctx := b.Context()
	if err := e.Start(ctx); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = e.Close() })
	runs := max(1, b.N/steps)
	b.ResetTimer()
	for i := range runs {
		ev := core.Event{
			Scope:      core.Scope{Platform: "slack", Workspace: "T1", Channel: "C1"},
			Visibility: core.Public, MessageID: fmt.Sprintf("M%d", i), Author: core.Person{ID: "U1"},
			Text: "go", MentionsBot: true, At: time.Now(),
		}
		if err := e.Deliver(ctx, core.Inbound{Event: &ev}); err != nil {
			b.Fatal(err)
		}
		if err := e.WaitIdle(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	m.mu.Lock()
	gaps := slices.Clone(m.gaps)
	m.mu.Unlock()
	if len(gaps) == 0 {
		b.Fatal("no steps measured")
	}
	slices.Sort(gaps)
	q := func(p float64) float64 { return float64(gaps[int(p*float64(len(gaps)-1))].Microseconds()) }
	b.ReportMetric(q(0.50), "p50-µs/step")
	b.ReportMetric(q(0.99), "p99-µs/step")
}
