package failover_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/llm/anthropic"
	"github.com/marlowe-bot/marlowe/llm/failover"
	"github.com/marlowe-bot/marlowe/llm/llmtest"
	"github.com/marlowe-bot/marlowe/llm/openai"
	"github.com/marlowe-bot/marlowe/llm/scripted"
)

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

func runView() core.View {
	return core.View{
		System: "You are Marlowe.",
		Messages: []core.Message{
			{Role: core.RoleUser, Text: "What's the weather?"},
			{Role: core.RoleAssistant, ToolCalls: []core.ToolCall{{ID: "c1", Name: "weather", Args: `{"city":"Paris"}`}}},
			{Role: core.RoleTool, ToolCallID: "c1", Name: "weather", Text: "sunny"},
		},
		Tools: []core.ToolSpec{{Name: "weather", Description: "Weather", Schema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}}}`)}},
	}
}

func openAIModel(t *testing.T, srv *llmtest.OpenAIServer, label string) *openai.Model {
	t.Helper()
	m, err := openai.New(openai.Config{BaseURL: srv.URL, Model: label + "-model", Provider: label, MaxRetries: openai.NoRetries, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// The secondary gets the very same view the primary failed on.
func TestFailoverOnServerErrorKeepsTheView(t *testing.T) {
	for _, tc := range []struct {
		name    string
		primary llmtest.Response
	}{
		{"500", llmtest.Error(500, "down")},
		{"503", llmtest.Unavailable()},
		{"429", llmtest.RateLimited("20")},
		{"bad response", llmtest.Raw(200, `{"choices":`)},
		{"401", llmtest.Error(401, "bad key")},
		{"400", llmtest.Error(400, "context too long")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, s := llmtest.NewOpenAIServer(t), llmtest.NewOpenAIServer(t)
			p.Enqueue(tc.primary)
			s.Enqueue(llmtest.Text("from the secondary"))
			m := failover.New(openAIModel(t, p, "primary"), openAIModel(t, s, "secondary"), failover.WithLogger(quiet()))

			r, err := m.Step(context.Background(), runView())
			if err != nil {
				t.Fatalf("Step: %v", err)
			}
			if r.Text != "from the secondary" || r.Provider != "secondary" || r.Model != "secondary-model" {
				t.Errorf("reply = %+v", r)
			}
			pr, sr := p.Requests(), s.Requests()
			if len(pr) != 1 || len(sr) != 1 {
				t.Fatalf("requests: primary %d, secondary %d", len(pr), len(sr))
			}
			var pm, sm struct {
				Messages json.RawMessage `json:"messages"`
				Tools    json.RawMessage `json:"tools"`
			}
			if err := pr[0].Decode(&pm); err != nil {
				t.Fatal(err)
			}
			if err := sr[0].Decode(&sm); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(pm.Messages, sm.Messages) || !bytes.Equal(pm.Tools, sm.Tools) {
				t.Errorf("secondary saw another view:\nprimary   %s\nsecondary %s", pm.Messages, sm.Messages)
			}
		})
	}
}

// Across providers: OpenAI fails, Anthropic answers the same view.
func TestFailoverAcrossProviders(t *testing.T) {
	p, s := llmtest.NewOpenAIServer(t), llmtest.NewAnthropicServer(t)
	p.Enqueue(llmtest.Error(502, "bad gateway"))
	s.Enqueue(llmtest.Text("claude here"))
	sec, err := anthropic.New(anthropic.Config{BaseURL: s.URL, Model: "claude-test", MaxRetries: anthropic.NoRetries})
	if err != nil {
		t.Fatal(err)
	}
	m := failover.New(openAIModel(t, p, "openai"), sec, failover.WithLogger(quiet()))
	r, err := m.Step(context.Background(), runView())
	if err != nil || r.Provider != "anthropic" || r.Text != "claude here" {
		t.Fatalf("Step = %+v, %v", r, err)
	}
	reqs, err := s.MessageRequests()
	if err != nil {
		t.Fatal(err)
	}
	msgs := reqs[0].Messages
	if reqs[0].SystemText() != "You are Marlowe." || len(msgs) != 3 ||
		msgs[1].Content[0].Type != "tool_use" || msgs[2].Content[0].ToolUseID != "c1" {
		t.Errorf("anthropic request = %+v", reqs[0])
	}
}

func TestTimeoutFailsOverPromptly(t *testing.T) {
	p, s := llmtest.NewOpenAIServer(t), llmtest.NewOpenAIServer(t)
	p.Enqueue(llmtest.Hang())
	s.Enqueue(llmtest.Text("fast"))
	slow, err := openai.New(openai.Config{BaseURL: p.URL, Model: "m", Provider: "primary", Timeout: 150 * time.Millisecond, MaxRetries: openai.NoRetries})
	if err != nil {
		t.Fatal(err)
	}
	m := failover.New(slow, openAIModel(t, s, "secondary"), failover.WithLogger(quiet()))
	start := time.Now()
	r, err := m.Step(context.Background(), runView())
	if err != nil || r.Provider != "secondary" {
		t.Fatalf("Step = %+v, %v", r, err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("failover took %v", d)
	}
}

func TestSuccessDoesNotTouchSecondary(t *testing.T) {
	prim := scripted.NewNamed("primary", scripted.Text("ok"))
	sec := scripted.NewNamed("secondary")
	r, err := failover.New(prim, sec).Step(context.Background(), runView())
	if err != nil || r.Provider != "primary" || sec.Calls() != 0 {
		t.Errorf("Step = %+v, %v; secondary calls %d", r, err, sec.Calls())
	}
}

func TestNoFailoverWhenThereIsNothingToFailOverFrom(t *testing.T) {
	t.Run("cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		prim := scripted.NewNamed("primary", scripted.Func(func(core.View) (core.Reply, error) {
			cancel()
			return core.Reply{}, &core.ModelError{Failure: core.FailTimeout, Err: context.Canceled}
		}))
		sec := scripted.NewNamed("secondary", scripted.Text("should not run"))
		_, err := failover.New(prim, sec, failover.WithLogger(quiet())).Step(ctx, runView())
		if err == nil || sec.Calls() != 0 {
			t.Errorf("err = %v, secondary calls %d", err, sec.Calls())
		}
	})
	t.Run("not a model error", func(t *testing.T) {
		bug := errors.New("bug")
		prim := scripted.NewNamed("primary", scripted.Error(bug))
		sec := scripted.NewNamed("secondary", scripted.Text("should not run"))
		_, err := failover.New(prim, sec, failover.WithLogger(quiet())).Step(context.Background(), runView())
		if !errors.Is(err, bug) || sec.Calls() != 0 {
			t.Errorf("err = %v, secondary calls %d", err, sec.Calls())
		}
	})
}

func TestBothFail(t *testing.T) {
	cases := []struct {
		name       string
		prim, sec  core.ModelFailure
		want       core.ModelFailure
		wantSource string
	}{
		{"both unavailable", core.FailUnavailable, core.FailUnavailable, core.FailUnavailable, "secondary"},
		{"primary down, secondary misconfigured", core.FailUnavailable, core.FailAuth, core.FailUnavailable, "primary"},
		{"primary misconfigured, secondary rate limited", core.FailAuth, core.FailRateLimited, core.FailRateLimited, "secondary"},
		{"both refuse", core.FailBadRequest, core.FailBadRequest, core.FailBadRequest, "secondary"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			prim := scripted.NewNamed("primary", scripted.Fail(tc.prim))
			sec := scripted.NewNamed("secondary", scripted.Fail(tc.sec))
			_, err := failover.New(prim, sec, failover.WithLogger(quiet())).Step(context.Background(), runView())
			me, ok := core.AsModelError(err)
			if !ok || me.Failure != tc.want || me.Provider != tc.wantSource {
				t.Fatalf("err = %v, want %s from %s", err, tc.want, tc.wantSource)
			}
			if !strings.Contains(err.Error(), "primary") || !strings.Contains(err.Error(), "secondary") {
				t.Errorf("error should mention both: %v", err)
			}
		})
	}
}

type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func TestBreakerSkipsPrimaryDuringCooldown(t *testing.T) {
	var primaryCalls atomic.Int32
	healthy := atomic.Bool{}
	prim := scripted.NewNamed("primary").Otherwise(func(core.View) (core.Reply, error) {
		primaryCalls.Add(1)
		if healthy.Load() {
			return core.Reply{Text: "primary is back"}, nil
		}
		return core.Reply{}, &core.ModelError{Failure: core.FailUnavailable, Err: errors.New("503")}
	})
	sec := scripted.NewNamed("secondary").Otherwise(func(core.View) (core.Reply, error) {
		return core.Reply{Text: "secondary"}, nil
	})
	clk := &clock{now: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
	var logs bytes.Buffer
	m := failover.New(prim, sec,
		failover.WithThreshold(2), failover.WithCooldown(time.Minute), failover.WithClock(clk.Now),
		failover.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	step := func() core.Reply {
		t.Helper()
		r, err := m.Step(context.Background(), runView())
		if err != nil {
			t.Fatalf("Step: %v", err)
		}
		return r
	}

	// Two failures in a row open the breaker.
	step()
	if m.Open() {
		t.Fatal("breaker open after one failure")
	}
	step()
	if !m.Open() || primaryCalls.Load() != 2 {
		t.Fatalf("open=%v primary calls=%d, want open after 2", m.Open(), primaryCalls.Load())
	}
	// While open, the primary is not asked.
	for range 3 {
		if r := step(); r.Provider != "secondary" {
			t.Errorf("reply from %s", r.Provider)
		}
	}
	if primaryCalls.Load() != 2 {
		t.Errorf("primary called %d times while the breaker was open", primaryCalls.Load())
	}
	// After the cool-down, one probe; it fails, the breaker reopens at once.
	clk.Advance(61 * time.Second)
	step()
	if primaryCalls.Load() != 3 || !m.Open() {
		t.Errorf("half-open probe: primary calls %d, open %v", primaryCalls.Load(), m.Open())
	}
	step()
	if primaryCalls.Load() != 3 {
		t.Error("primary asked again right after a failed probe")
	}
	// Next probe succeeds: closed again.
	clk.Advance(61 * time.Second)
	healthy.Store(true)
	if r := step(); r.Provider != "primary" || r.Text != "primary is back" {
		t.Errorf("reply = %+v", r)
	}
	if m.Open() {
		t.Error("breaker still open after a success")
	}
	for _, want := range []string{"breaker open", "primary recovered"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("logs lack %q:\n%s", want, logs.String())
		}
	}
}

func TestBadRequestDoesNotCountAndSuccessResets(t *testing.T) {
	prim := scripted.NewNamed("primary",
		scripted.Fail(core.FailUnavailable),
		scripted.Fail(core.FailBadRequest),
		scripted.Fail(core.FailBadRequest),
		scripted.Fail(core.FailUnavailable), // 2nd health failure in a row: opens
	)
	sec := scripted.NewNamed("secondary").Otherwise(scripted.Echo)
	m := failover.New(prim, sec, failover.WithThreshold(2), failover.WithLogger(quiet()))
	for i := range 3 {
		if _, err := m.Step(context.Background(), runView()); err != nil {
			t.Fatal(err)
		}
		if m.Open() {
			t.Fatalf("breaker open after call %d", i+1)
		}
	}
	if _, err := m.Step(context.Background(), runView()); err != nil {
		t.Fatal(err)
	}
	if !m.Open() {
		t.Error("breaker closed after two consecutive health failures")
	}

	prim2 := scripted.NewNamed("primary", scripted.Fail(core.FailTimeout), scripted.Text("ok"), scripted.Fail(core.FailTimeout))
	m2 := failover.New(prim2, sec, failover.WithThreshold(2), failover.WithLogger(quiet()))
	for range 3 {
		if _, err := m2.Step(context.Background(), runView()); err != nil {
			t.Fatal(err)
		}
	}
	if m2.Open() {
		t.Error("a success in between did not reset the count")
	}
}

func TestAuthFailureFailsOverAndIsLoggedAsError(t *testing.T) {
	var logs bytes.Buffer
	prim := scripted.NewNamed("primary", scripted.Fail(core.FailAuth))
	sec := scripted.NewNamed("secondary", scripted.Text("up"))
	m := failover.New(prim, sec, failover.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	r, err := m.Step(context.Background(), runView())
	if err != nil || r.Provider != "secondary" {
		t.Fatalf("Step = %+v, %v", r, err)
	}
	if !strings.Contains(logs.String(), "level=ERROR") || !strings.Contains(logs.String(), "auth") {
		t.Errorf("auth failure not logged as an error:\n%s", logs.String())
	}
}

func TestNilSecondaryPassesThrough(t *testing.T) {
	prim := scripted.NewNamed("primary", scripted.Fail(core.FailUnavailable))
	_, err := failover.New(prim, nil).Step(context.Background(), runView())
	if me, ok := core.AsModelError(err); !ok || me.Provider != "primary" {
		t.Errorf("err = %v", err)
	}
}

func TestConcurrentFailover(t *testing.T) {
	flaky := func(v core.View) (core.Reply, error) {
		if len(v.Messages[0].Text)%2 == 0 {
			return core.Reply{}, &core.ModelError{Failure: core.FailUnavailable, Err: errors.New("x")}
		}
		return core.Reply{Text: v.Messages[0].Text}, nil
	}
	prim := scripted.NewNamed("primary").Otherwise(flaky)
	sec := scripted.NewNamed("secondary").Otherwise(func(v core.View) (core.Reply, error) {
		return core.Reply{Text: v.Messages[0].Text}, nil
	})
	m := failover.New(prim, sec, failover.WithThreshold(5), failover.WithCooldown(time.Millisecond), failover.WithLogger(quiet()))
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			text := strings.Repeat("y", i+1)
			r, err := m.Step(context.Background(), core.View{Messages: []core.Message{{Role: core.RoleUser, Text: text}}})
			if err != nil || r.Text != text {
				t.Errorf("Step = %+v, %v", r, err)
			}
		}()
	}
	wg.Wait()
}
