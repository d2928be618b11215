package scripted_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/llm/scripted"
)

func view(text string) core.View {
	return core.View{Messages: []core.Message{{Role: core.RoleUser, Text: text}}}
}

func TestPlaysStepsInOrder(t *testing.T) {
	boom := errors.New("boom")
	m := scripted.New(
		scripted.Text("one"),
		scripted.ToolCalls(scripted.Call{ID: "c1", Name: "search", Args: `{"q":`}),
		scripted.Error(boom),
		scripted.Fail(core.FailRateLimited),
		scripted.Func(func(v core.View) (core.Reply, error) {
			return core.Reply{Text: "saw " + v.Messages[0].Text, Provider: "custom"}, nil
		}),
	)
	ctx := context.Background()

	r, err := m.Step(ctx, view("a"))
	if err != nil || r.Text != "one" || r.Provider != "scripted" || r.Model != "scripted" {
		t.Errorf("step 1 = %+v, %v", r, err)
	}
	r, err = m.Step(ctx, view("b"))
	if err != nil || len(r.ToolCalls) != 1 || r.ToolCalls[0].Args != `{"q":` {
		t.Errorf("step 2 = %+v, %v", r, err)
	}
	if _, err = m.Step(ctx, view("c")); !errors.Is(err, boom) {
		t.Errorf("step 3 err = %v", err)
	}
	_, err = m.Step(ctx, view("d"))
	if me, ok := core.AsModelError(err); !ok || me.Failure != core.FailRateLimited || me.Provider != "scripted" || !me.Transient() {
		t.Errorf("step 4 err = %v", err)
	}
	r, err = m.Step(ctx, view("e"))
	if err != nil || r.Text != "saw e" || r.Provider != "custom" {
		t.Errorf("step 5 = %+v, %v", r, err)
	}
	if m.Remaining() != 0 || m.Calls() != 5 {
		t.Errorf("remaining %d, calls %d", m.Remaining(), m.Calls())
	}

	_, err = m.Step(ctx, view("f"))
	if !errors.Is(err, scripted.ErrExhausted) || !strings.Contains(err.Error(), "call 6") {
		t.Errorf("exhausted err = %v", err)
	}
	if _, ok := core.AsModelError(err); ok {
		t.Error("an exhausted script is a test bug, not a model failure")
	}
}

func TestRecordsViewsAsCopies(t *testing.T) {
	m := scripted.New(scripted.Text("x"), scripted.Text("y"))
	v := core.View{
		System:   "sys",
		Messages: []core.Message{{Role: core.RoleAssistant, ToolCalls: []core.ToolCall{{ID: "1", Name: "n", Args: "{}"}}}},
		Tools:    []core.ToolSpec{{Name: "n", Schema: []byte(`{"type":"object"}`)}},
	}
	if _, err := m.Step(context.Background(), v); err != nil {
		t.Fatal(err)
	}
	v.Messages[0].ToolCalls[0].Args = "mutated"
	v.Tools[0].Schema[0] = '['
	if _, err := m.Step(context.Background(), view("second")); err != nil {
		t.Fatal(err)
	}
	views := m.Views()
	if len(views) != 2 || views[0].System != "sys" || views[1].Messages[0].Text != "second" {
		t.Fatalf("views = %+v", views)
	}
	if views[0].Messages[0].ToolCalls[0].Args != "{}" || string(views[0].Tools[0].Schema) != `{"type":"object"}` {
		t.Errorf("recorded view changed with the caller's: %+v", views[0])
	}
	views[0].System = "changed"
	if m.Views()[0].System != "sys" {
		t.Error("Views returned the model's own slice")
	}
}

func TestDoneContextDoesNotUseAStep(t *testing.T) {
	m := scripted.New(scripted.Text("kept"))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := m.Step(ctx, view("x")); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
	if r, err := m.Step(context.Background(), view("x")); err != nil || r.Text != "kept" {
		t.Errorf("step = %+v, %v", r, err)
	}
}

func TestOtherwiseAndThen(t *testing.T) {
	m := scripted.New(scripted.Text("first")).Otherwise(scripted.Echo)
	m.Then(scripted.Text("second"))
	for i, want := range []string{"first", "second", "You said: hello there", "You said: hello there"} {
		r, err := m.Step(context.Background(), view("hello   there"))
		if err != nil || r.Text != want {
			t.Errorf("call %d = %+v, %v; want %q", i+1, r, err, want)
		}
	}
	if got := scripted.EchoText(core.View{Messages: []core.Message{{Role: core.RoleTool, Text: "42"}}}); got != "The tool answered: 42" {
		t.Errorf("EchoText = %q", got)
	}
}

func TestConcurrentUse(t *testing.T) {
	const n = 50
	steps := make([]scripted.Step, n)
	for i := range steps {
		steps[i] = scripted.Func(func(v core.View) (core.Reply, error) { return core.Reply{Text: v.Messages[0].Text}, nil })
	}
	m := scripted.NewNamed("primary", steps...)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			text := strings.Repeat("x", i)
			r, err := m.Step(context.Background(), view(text))
			if err != nil || r.Text != text || r.Provider != "primary" {
				t.Errorf("call = %+v, %v", r, err)
			}
		}()
	}
	wg.Wait()
	if m.Calls() != n || m.Remaining() != 0 || len(m.Views()) != n {
		t.Errorf("calls %d remaining %d", m.Calls(), m.Remaining())
	}
	if _, err := m.Step(context.Background(), view("late")); !errors.Is(err, scripted.ErrExhausted) {
		t.Errorf("err = %v", err)
	}
}
