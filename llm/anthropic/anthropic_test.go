package anthropic_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/llm/anthropic"
	"github.com/marlowe-bot/marlowe/llm/llmtest"
)

func newModel(t *testing.T, srv *llmtest.AnthropicServer, mod func(*anthropic.Config)) *anthropic.Model {
	t.Helper()
	cfg := anthropic.Config{BaseURL: srv.URL, Model: "claude-test", MaxRetries: anthropic.NoRetries, Timeout: 5 * time.Second}
	if mod != nil {
		mod(&cfg)
	}
	m, err := anthropic.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return m
}

func requests(t *testing.T, srv *llmtest.AnthropicServer) []llmtest.AnthropicRequest {
	t.Helper()
	reqs, err := srv.MessageRequests()
	if err != nil {
		t.Fatalf("decode requests: %v", err)
	}
	return reqs
}

func user(text string) core.View {
	return core.View{Messages: []core.Message{{Role: core.RoleUser, Text: text}}}
}

func TestStepText(t *testing.T) {
	srv := llmtest.NewAnthropicServer(t)
	srv.Enqueue(llmtest.Response{Text: "Bonjour.", Usage: llmtest.Usage{InputTokens: 20, OutputTokens: 4}})
	m := newModel(t, srv, nil)
	v := user("salut")
	v.System = "You are Marlowe."
	r, err := m.Step(context.Background(), v)
	if err != nil {
		t.Fatalf("Step: %v", err)
	}
	want := core.Reply{Text: "Bonjour.", Usage: core.Usage{InputTokens: 20, OutputTokens: 4}, Provider: "anthropic", Model: "claude-test"}
	if !reflect.DeepEqual(r, want) {
		t.Errorf("reply = %+v, want %+v", r, want)
	}
	req := requests(t, srv)[0]
	if req.Model != "claude-test" || req.SystemText() != "You are Marlowe." || req.MaxTokens != anthropic.DefaultMaxTokens {
		t.Errorf("request = %+v", req)
	}
	if len(req.Messages) != 1 || req.Messages[0].Role != "user" || req.Messages[0].Content[0].Text != "salut" {
		t.Errorf("messages = %+v", req.Messages)
	}
	if path := srv.Requests()[0].Path; path != "/v1/messages" {
		t.Errorf("path = %q", path)
	}
}

const weatherSchema = `{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer","minimum":1,"maximum":7}},"required":["city"],"additionalProperties":false}`

func TestToolRoundTrip(t *testing.T) {
	srv := llmtest.NewAnthropicServer(t)
	srv.Enqueue(llmtest.Response{
		Text:      "Checking Lyon.",
		ToolCalls: []llmtest.ToolCall{llmtest.Call("toolu_2", "get_weather", `{"city": "Lyon", "days": 2}`)},
		Usage:     llmtest.Usage{InputTokens: 100, OutputTokens: 30},
	})
	m := newModel(t, srv, nil)
	view := core.View{
		System: "sys",
		Messages: []core.Message{
			{Role: core.RoleUser, Text: "Weather in Paris?"},
			{Role: core.RoleAssistant, Text: "Let me check.", ToolCalls: []core.ToolCall{
				{ID: "toolu_1", Name: "get_weather", Args: `{"city":"Paris"}`},
				{ID: "toolu_x", Name: "search", Args: `{"q": oops`},
			}},
			{Role: core.RoleTool, ToolCallID: "toolu_1", Name: "get_weather", Text: `{"temp":21}`},
			{Role: core.RoleTool, ToolCallID: "toolu_x", Name: "search", Text: "error: arguments are not valid JSON"},
			{Role: core.RoleUser, Text: "And Lyon?"},
			{Role: core.RoleUser, Text: "for two days"},
		},
		Tools: []core.ToolSpec{
			{Name: "get_weather", Description: "Current weather", Schema: json.RawMessage(weatherSchema)},
			{Name: "search"},
		},
		MaxTokens: 64000, // larger than the SDK's non-streaming estimate allows by default
	}
	r, err := m.Step(context.Background(), view)
	if err != nil {
		t.Fatalf("Step: %v", err)
	}
	if r.Text != "Checking Lyon." || len(r.ToolCalls) != 1 {
		t.Fatalf("reply = %+v", r)
	}
	if tc := r.ToolCalls[0]; tc.ID != "toolu_2" || tc.Name != "get_weather" {
		t.Errorf("tool call = %+v", tc)
	} else {
		llmtest.JSONEqual(t, "tool call args", []byte(tc.Args), []byte(`{"city":"Lyon","days":2}`))
	}
	if r.Usage != (core.Usage{InputTokens: 100, OutputTokens: 30}) {
		t.Errorf("usage = %+v", r.Usage)
	}

	req := requests(t, srv)[0]
	if req.MaxTokens != 64000 || req.SystemText() != "sys" {
		t.Errorf("max_tokens = %d, system = %q", req.MaxTokens, req.SystemText())
	}
	if len(req.Tools) != 2 || req.Tools[0].Name != "get_weather" || req.Tools[0].Description != "Current weather" || req.Tools[1].Name != "search" {
		t.Fatalf("tools = %+v", req.Tools)
	}
	llmtest.JSONEqual(t, "input_schema", req.Tools[0].InputSchema, []byte(weatherSchema))
	llmtest.JSONEqual(t, "empty input_schema", req.Tools[1].InputSchema, []byte(`{"type":"object","properties":{}}`))

	// user, assistant(text, tool_use, tool_use), user(tool_result, tool_result, text, text)
	msgs := req.Messages
	if len(msgs) != 3 || msgs[0].Role != "user" || msgs[1].Role != "assistant" || msgs[2].Role != "user" {
		t.Fatalf("messages = %+v", msgs)
	}
	a := msgs[1].Content
	if len(a) != 3 || a[0].Type != "text" || a[0].Text != "Let me check." ||
		a[1].Type != "tool_use" || a[1].ID != "toolu_1" || a[1].Name != "get_weather" ||
		a[2].Type != "tool_use" || a[2].ID != "toolu_x" || a[2].Name != "search" {
		t.Fatalf("assistant blocks = %+v", a)
	}
	llmtest.JSONEqual(t, "tool_use input", a[1].Input, []byte(`{"city":"Paris"}`))
	llmtest.JSONEqual(t, "malformed tool_use input", a[2].Input, []byte(`{"_raw_arguments":"{\"q\": oops"}`))
	u := msgs[2].Content
	if len(u) != 4 || u[0].Type != "tool_result" || u[0].ToolUseID != "toolu_1" || u[0].ResultText() != `{"temp":21}` ||
		u[1].Type != "tool_result" || u[1].ToolUseID != "toolu_x" ||
		u[2].Type != "text" || u[2].Text != "And Lyon?" || u[3].Text != "for two days" {
		t.Errorf("user blocks = %+v", u)
	}
}

func TestToolUseInputPassesThrough(t *testing.T) {
	srv := llmtest.NewAnthropicServer(t)
	raw := `{"q":"a \"quoted\" thing","n":1.50,"nested":{"k":[1,2]}}`
	srv.Enqueue(llmtest.Raw(200, `{"id":"m","type":"message","role":"assistant","model":"claude-test","stop_reason":"tool_use",
		"content":[{"type":"tool_use","id":"t1","name":"search","input":`+raw+`}],"usage":{"input_tokens":1,"output_tokens":1}}`))
	m := newModel(t, srv, nil)
	r, err := m.Step(context.Background(), user("go"))
	if err != nil {
		t.Fatal(err)
	}
	if len(r.ToolCalls) != 1 || r.ToolCalls[0].Args != raw {
		t.Errorf("args = %+v, want verbatim %s", r.ToolCalls, raw)
	}
}

func TestErrorMapping(t *testing.T) {
	cases := []struct {
		name       string
		resp       llmtest.Response
		want       core.ModelFailure
		retryAfter time.Duration
	}{
		{"429", llmtest.RateLimited("7"), core.FailRateLimited, 7 * time.Second},
		{"500", llmtest.Error(500, "boom"), core.FailUnavailable, 0},
		{"529 overloaded", llmtest.Error(529, "overloaded"), core.FailUnavailable, 0},
		{"502 html", llmtest.Response{Status: 502, Body: "<html>bad gateway</html>", Header: http.Header{"Content-Type": {"text/html"}}}, core.FailUnavailable, 0},
		{"401", llmtest.Error(401, "invalid x-api-key"), core.FailAuth, 0},
		{"403", llmtest.Error(403, "nope"), core.FailAuth, 0},
		{"400", llmtest.Error(400, "prompt is too long"), core.FailBadRequest, 0},
		{"unparseable body", llmtest.Raw(200, `{"content": [`), core.FailBadResponse, 0},
		{"no content", llmtest.Raw(200, `{"id":"m","type":"message"}`), core.FailBadResponse, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := llmtest.NewAnthropicServer(t)
			srv.Enqueue(tc.resp)
			m := newModel(t, srv, nil)
			_, err := m.Step(context.Background(), user("hi"))
			me, ok := core.AsModelError(err)
			if !ok {
				t.Fatalf("err = %v (%T), want *core.ModelError", err, err)
			}
			if me.Failure != tc.want || me.Provider != "anthropic" || me.RetryAfter != tc.retryAfter {
				t.Errorf("got %s/%s retry %v, want anthropic/%s retry %v (err %v)", me.Provider, me.Failure, me.RetryAfter, tc.want, tc.retryAfter, err)
			}
			if n := len(srv.Requests()); n != 1 {
				t.Errorf("%d requests, want 1", n)
			}
		})
	}
}

func TestLongRetryAfterIsNotWaitedFor(t *testing.T) {
	srv := llmtest.NewAnthropicServer(t)
	srv.Enqueue(llmtest.RateLimited("30"), llmtest.Text("too late"))
	m := newModel(t, srv, func(c *anthropic.Config) { c.MaxRetries = 2 })
	start := time.Now()
	_, err := m.Step(context.Background(), user("hi"))
	if me, ok := core.AsModelError(err); !ok || me.Failure != core.FailRateLimited || me.RetryAfter != 30*time.Second {
		t.Fatalf("err = %v, want FailRateLimited, RetryAfter 30s", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("took %v", d)
	}
	if n := len(srv.Requests()); n != 1 {
		t.Errorf("%d requests, want 1", n)
	}
}

func TestShortRetryIsTakenOnce(t *testing.T) {
	srv := llmtest.NewAnthropicServer(t)
	srv.Enqueue(llmtest.Response{Status: 503, Header: http.Header{"Retry-After-Ms": {"20"}}}, llmtest.Text("ok now"))
	m := newModel(t, srv, func(c *anthropic.Config) { c.MaxRetries = 0 }) // default: one retry
	r, err := m.Step(context.Background(), user("hi"))
	if err != nil || r.Text != "ok now" {
		t.Fatalf("Step = %+v, %v", r, err)
	}
	if n := len(srv.Requests()); n != 2 {
		t.Errorf("%d requests, want 2", n)
	}
}

func TestTimeoutIsPrompt(t *testing.T) {
	srv := llmtest.NewAnthropicServer(t)
	srv.Enqueue(llmtest.Hang(), llmtest.Hang())
	m := newModel(t, srv, func(c *anthropic.Config) { c.Timeout = 200 * time.Millisecond; c.MaxRetries = 0 })
	start := time.Now()
	_, err := m.Step(context.Background(), user("hi"))
	if me, ok := core.AsModelError(err); !ok || me.Failure != core.FailTimeout {
		t.Fatalf("err = %v, want FailTimeout", err)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err %v does not wrap context.DeadlineExceeded", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("timeout took %v", d)
	}
}

func TestCallerCancel(t *testing.T) {
	srv := llmtest.NewAnthropicServer(t)
	srv.Enqueue(llmtest.Hang())
	m := newModel(t, srv, nil)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	_, err := m.Step(ctx, user("hi"))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if _, ok := core.AsModelError(err); ok {
		t.Errorf("a cancellation must not be a *core.ModelError")
	}
}

func TestConnectionRefused(t *testing.T) {
	url, err := llmtest.RefusedURL()
	if err != nil {
		t.Fatal(err)
	}
	m, err := anthropic.New(anthropic.Config{BaseURL: url, Model: "m", MaxRetries: anthropic.NoRetries})
	if err != nil {
		t.Fatal(err)
	}
	_, err = m.Step(context.Background(), user("hi"))
	if me, ok := core.AsModelError(err); !ok || me.Failure != core.FailUnavailable {
		t.Fatalf("err = %v, want FailUnavailable", err)
	}
}

func TestAPIKeyAndEnvironmentIsolation(t *testing.T) {
	t.Setenv("ANTHROPIC_API_KEY", "sk-ant-from-environment")
	t.Setenv("ANTHROPIC_AUTH_TOKEN", "token-from-environment")
	t.Setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:1")
	srv := llmtest.NewAnthropicServer(t)
	noKey := newModel(t, srv, nil)
	withKey := newModel(t, srv, func(c *anthropic.Config) { c.APIKey = "sk-ant-configured" })
	if _, err := noKey.Step(context.Background(), user("hi")); err != nil {
		t.Fatalf("Step without key: %v", err)
	}
	if _, err := withKey.Step(context.Background(), user("hi")); err != nil {
		t.Fatalf("Step with key: %v", err)
	}
	reqs := srv.Requests()
	h := reqs[0].Header
	if h.Get("Authorization") != "" || h.Get("X-Api-Key") != "" {
		t.Errorf("credentials leaked from the environment: Authorization=%q X-Api-Key=%q", h.Get("Authorization"), h.Get("X-Api-Key"))
	}
	h = reqs[1].Header
	if got := h.Get("Authorization") + h.Get("X-Api-Key"); got == "" || !strings.Contains(got, "sk-ant-configured") {
		t.Errorf("configured key not sent: Authorization=%q X-Api-Key=%q", h.Get("Authorization"), h.Get("X-Api-Key"))
	}
	if h.Get("Anthropic-Version") == "" {
		t.Error("no anthropic-version header")
	}
}

func TestBadViewIsBadRequestWithoutACall(t *testing.T) {
	cases := map[string]core.View{
		"unknown role":           {Messages: []core.Message{{Role: "robot", Text: "x"}}},
		"tool result without id": {Messages: []core.Message{{Role: core.RoleTool, Text: "x"}}},
		"invalid schema":         {Messages: []core.Message{{Role: core.RoleUser, Text: "x"}}, Tools: []core.ToolSpec{{Name: "t", Schema: json.RawMessage(`{`)}}},
		"required not strings":   {Messages: []core.Message{{Role: core.RoleUser, Text: "x"}}, Tools: []core.ToolSpec{{Name: "t", Schema: json.RawMessage(`{"type":"object","required":[1]}`)}}},
	}
	for name, v := range cases {
		t.Run(name, func(t *testing.T) {
			srv := llmtest.NewAnthropicServer(t)
			m := newModel(t, srv, nil)
			_, err := m.Step(context.Background(), v)
			if me, ok := core.AsModelError(err); !ok || me.Failure != core.FailBadRequest {
				t.Fatalf("err = %v, want FailBadRequest", err)
			}
			if n := len(srv.Requests()); n != 0 {
				t.Errorf("%d requests sent for a bad view", n)
			}
		})
	}
}

func TestEmptyTextIsNeverSent(t *testing.T) {
	srv := llmtest.NewAnthropicServer(t)
	m := newModel(t, srv, nil)
	_, err := m.Step(context.Background(), core.View{Messages: []core.Message{
		{Role: core.RoleUser, Text: ""},
		{Role: core.RoleAssistant, ToolCalls: []core.ToolCall{{ID: "t1", Name: "x", Args: ""}}},
		{Role: core.RoleTool, ToolCallID: "t1", Text: ""},
	}})
	if err != nil {
		t.Fatal(err)
	}
	req := requests(t, srv)[0]
	for _, msg := range req.Messages {
		for _, b := range msg.Content {
			if b.Type == "text" && b.Text == "" {
				t.Errorf("empty text block sent: %+v", req.Messages)
			}
		}
	}
	a := req.Messages[1].Content
	if len(a) != 1 || a[0].Type != "tool_use" {
		t.Fatalf("assistant blocks = %+v", a)
	}
	llmtest.JSONEqual(t, "empty args input", a[0].Input, []byte(`{}`))
}
