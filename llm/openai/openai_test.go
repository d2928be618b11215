package openai_test

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
	"github.com/marlowe-bot/marlowe/llm/llmtest"
	"github.com/marlowe-bot/marlowe/llm/openai"
)

func newModel(t *testing.T, srv *llmtest.OpenAIServer, mod func(*openai.Config)) *openai.Model {
	t.Helper()
	cfg := openai.Config{BaseURL: srv.URL, Model: "test-model", MaxRetries: openai.NoRetries, Timeout: 5 * time.Second}
	if mod != nil {
		mod(&cfg)
	}
	m, err := openai.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return m
}

func chatRequests(t *testing.T, srv *llmtest.OpenAIServer) []llmtest.OpenAIChatRequest {
	t.Helper()
	reqs, err := srv.ChatRequests()
	if err != nil {
		t.Fatalf("decode requests: %v", err)
	}
	return reqs
}

func TestStepText(t *testing.T) {
	srv := llmtest.NewOpenAIServer(t)
	srv.Enqueue(llmtest.Response{Text: "Hello there.", Usage: llmtest.Usage{InputTokens: 12, OutputTokens: 3}, Model: "test-model-2025"})
	m := newModel(t, srv, nil)

	r, err := m.Step(context.Background(), core.View{
		System:   "You are Marlowe.",
		Messages: []core.Message{{Role: core.RoleUser, Text: "hi"}},
	})
	if err != nil {
		t.Fatalf("Step: %v", err)
	}
	want := core.Reply{Text: "Hello there.", Usage: core.Usage{InputTokens: 12, OutputTokens: 3}, Provider: "openai", Model: "test-model-2025"}
	if !reflect.DeepEqual(r, want) {
		t.Errorf("reply = %+v, want %+v", r, want)
	}

	reqs := chatRequests(t, srv)
	if len(reqs) != 1 {
		t.Fatalf("%d requests, want 1", len(reqs))
	}
	req := reqs[0]
	if req.Model != "test-model" {
		t.Errorf("model = %q", req.Model)
	}
	if len(req.Messages) != 2 || req.Messages[0].Role != "system" || req.Messages[0].Text() != "You are Marlowe." ||
		req.Messages[1].Role != "user" || req.Messages[1].Text() != "hi" {
		t.Errorf("messages = %+v", req.Messages)
	}
	if len(req.Tools) != 0 || req.MaxTokens != nil || req.MaxCompletionTokens != nil {
		t.Errorf("unexpected tools or max tokens: %+v", req)
	}
}

const weatherSchema = `{"type":"object","properties":{"city":{"type":"string","description":"City name"},"days":{"type":"integer","minimum":1,"maximum":7}},"required":["city"],"additionalProperties":false}`

func TestToolCallRoundTrip(t *testing.T) {
	srv := llmtest.NewOpenAIServer(t)
	srv.Enqueue(llmtest.Tools(
		llmtest.Call("call_b", "get_weather", `{"city":"Lyon","days":2}`),
		llmtest.Call("call_c", "search", `{"q":"rain"}`),
	))
	m := newModel(t, srv, nil)

	view := core.View{
		System: "sys",
		Messages: []core.Message{
			{Role: core.RoleUser, Text: "Weather in Paris?"},
			{Role: core.RoleAssistant, Text: "Let me check.", ToolCalls: []core.ToolCall{
				{ID: "call_a", Name: "get_weather", Args: `{"city":"Paris"}`},
				{ID: "call_x", Name: "search", Args: `{"q": oops`},
			}},
			{Role: core.RoleTool, ToolCallID: "call_a", Name: "get_weather", Text: `{"temp":21}`},
			{Role: core.RoleTool, ToolCallID: "call_x", Name: "search", Text: "error: arguments are not valid JSON"},
			{Role: core.RoleAssistant, ToolCalls: []core.ToolCall{{ID: "call_y", Name: "search", Args: ""}}},
			{Role: core.RoleTool, ToolCallID: "call_y", Name: "search", Text: ""},
			{Role: core.RoleUser, Text: "And Lyon?"},
		},
		Tools: []core.ToolSpec{
			{Name: "get_weather", Description: "Current weather", Schema: json.RawMessage(weatherSchema)},
			{Name: "search", Description: "", Schema: nil},
		},
		MaxTokens: 256,
	}
	r, err := m.Step(context.Background(), view)
	if err != nil {
		t.Fatalf("Step: %v", err)
	}
	wantCalls := []core.ToolCall{
		{ID: "call_b", Name: "get_weather", Args: `{"city":"Lyon","days":2}`},
		{ID: "call_c", Name: "search", Args: `{"q":"rain"}`},
	}
	if !reflect.DeepEqual(r.ToolCalls, wantCalls) || r.Text != "" {
		t.Errorf("reply = %+v, want tool calls %+v", r, wantCalls)
	}

	req := chatRequests(t, srv)[0]
	if req.MaxTokens == nil || *req.MaxTokens != 256 || req.MaxCompletionTokens != nil {
		t.Errorf("max tokens: max_tokens=%v max_completion_tokens=%v", req.MaxTokens, req.MaxCompletionTokens)
	}
	// Tools.
	if len(req.Tools) != 2 {
		t.Fatalf("tools = %+v", req.Tools)
	}
	if tl := req.Tools[0]; tl.Type != "function" || tl.Function.Name != "get_weather" || tl.Function.Description != "Current weather" {
		t.Errorf("tool 0 = %+v", tl)
	}
	llmtest.JSONEqual(t, "parameters", req.Tools[0].Function.Parameters, []byte(weatherSchema))
	llmtest.JSONEqual(t, "empty parameters", req.Tools[1].Function.Parameters, []byte(`{"type":"object","properties":{}}`))

	// Messages.
	msgs := req.Messages
	roles := make([]string, len(msgs))
	for i, msg := range msgs {
		roles[i] = msg.Role
	}
	if want := []string{"system", "user", "assistant", "tool", "tool", "assistant", "tool", "user"}; !reflect.DeepEqual(roles, want) {
		t.Fatalf("roles = %v, want %v", roles, want)
	}
	asst := msgs[2]
	if asst.Text() != "Let me check." || len(asst.ToolCalls) != 2 {
		t.Fatalf("assistant message = %+v", asst)
	}
	for i, want := range view.Messages[1].ToolCalls {
		got := asst.ToolCalls[i]
		if got.ID != want.ID || got.Type != "function" || got.Function.Name != want.Name || got.Function.Arguments != want.Args {
			t.Errorf("assistant tool call %d = %+v, want %+v (arguments verbatim)", i, got, want)
		}
	}
	if msgs[3].ToolCallID != "call_a" || msgs[3].Text() != `{"temp":21}` {
		t.Errorf("tool result = %+v", msgs[3])
	}
	if msgs[4].ToolCallID != "call_x" || !strings.Contains(msgs[4].Text(), "not valid JSON") {
		t.Errorf("tool result = %+v", msgs[4])
	}
	if string(msgs[5].Content) != "" && string(msgs[5].Content) != "null" {
		t.Errorf("assistant turn with only tool calls has content %s", msgs[5].Content)
	}
	if msgs[6].ToolCallID != "call_y" || msgs[6].Text() != "" {
		t.Errorf("empty tool result = %+v", msgs[6])
	}
	if msgs[7].Text() != "And Lyon?" {
		t.Errorf("last user message = %+v", msgs[7])
	}
}

func TestMalformedToolArgumentsPassThroughVerbatim(t *testing.T) {
	cases := []string{
		`{"city": "Par`,
		`not json at all`,
		`{"a":1}{"b":2}`,
		``,
		`  {"spaced" :  true }  `,
		`"just a string"`,
	}
	srv := llmtest.NewOpenAIServer(t)
	m := newModel(t, srv, nil)
	for _, args := range cases {
		srv.Enqueue(llmtest.Tools(llmtest.Call("c1", "search", args)))
		r, err := m.Step(context.Background(), core.View{Messages: []core.Message{{Role: core.RoleUser, Text: "go"}}})
		if err != nil {
			t.Fatalf("args %q: Step: %v", args, err)
		}
		if len(r.ToolCalls) != 1 || r.ToolCalls[0].Args != args || r.ToolCalls[0].Name != "search" {
			t.Errorf("args %q: got %+v", args, r.ToolCalls)
		}
	}
}

func TestToolCallWithoutIDGetsOne(t *testing.T) {
	srv := llmtest.NewOpenAIServer(t)
	srv.Enqueue(llmtest.Raw(200, `{"id":"x","object":"chat.completion","created":1,"model":"m",
		"choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":null,
		"tool_calls":[{"type":"function","function":{"name":"search","arguments":"{}"}},{"function":{"name":"search","arguments":"{}"}}]}}]}`))
	m := newModel(t, srv, nil)
	r, err := m.Step(context.Background(), core.View{Messages: []core.Message{{Role: core.RoleUser, Text: "go"}}})
	if err != nil {
		t.Fatalf("Step: %v", err)
	}
	if len(r.ToolCalls) != 2 || r.ToolCalls[0].ID == "" || r.ToolCalls[1].ID == "" || r.ToolCalls[0].ID == r.ToolCalls[1].ID {
		t.Errorf("tool calls = %+v, want distinct generated ids", r.ToolCalls)
	}
}

func TestErrorMapping(t *testing.T) {
	date := time.Now().Add(90 * time.Second).UTC().Format(http.TimeFormat)
	cases := []struct {
		name       string
		resp       llmtest.Response
		want       core.ModelFailure
		retryAfter time.Duration // exact, or (when negative) at least -retryAfter
	}{
		{"429 retry-after seconds", llmtest.RateLimited("7"), core.FailRateLimited, 7 * time.Second},
		{"429 retry-after date", llmtest.RateLimited(date), core.FailRateLimited, -80 * time.Second},
		{"429 retry-after-ms", llmtest.Response{Status: 429, Header: http.Header{"Retry-After-Ms": {"1500"}}}, core.FailRateLimited, 1500 * time.Millisecond},
		{"429 without header", llmtest.RateLimited(""), core.FailRateLimited, 0},
		{"500", llmtest.Error(500, "boom"), core.FailUnavailable, 0},
		{"502 plain text", llmtest.Response{Status: 502, Body: "bad gateway", Header: http.Header{"Content-Type": {"text/plain"}}}, core.FailUnavailable, 0},
		{"503", llmtest.Unavailable(), core.FailUnavailable, 0},
		{"401", llmtest.Error(401, "invalid api key"), core.FailAuth, 0},
		{"403", llmtest.Error(403, "forbidden"), core.FailAuth, 0},
		{"400", llmtest.Error(400, "context too long"), core.FailBadRequest, 0},
		{"404 unknown model", llmtest.Error(404, "model not found"), core.FailBadRequest, 0},
		{"unparseable body", llmtest.Raw(200, `{"choices": [`), core.FailBadResponse, 0},
		{"not JSON at all", llmtest.Response{Body: "<html>hi</html>", Header: http.Header{"Content-Type": {"text/html"}}}, core.FailBadResponse, 0},
		{"empty choices", llmtest.Raw(200, `{"id":"x","object":"chat.completion","model":"m","choices":[]}`), core.FailBadResponse, 0},
		{"tool call without name", llmtest.Raw(200, `{"choices":[{"message":{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"arguments":"{}"}}]}}]}`), core.FailBadResponse, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := llmtest.NewOpenAIServer(t)
			srv.Enqueue(tc.resp)
			m := newModel(t, srv, nil)
			_, err := m.Step(context.Background(), core.View{Messages: []core.Message{{Role: core.RoleUser, Text: "hi"}}})
			me, ok := core.AsModelError(err)
			if !ok {
				t.Fatalf("err = %v (%T), want *core.ModelError", err, err)
			}
			if me.Failure != tc.want || me.Provider != "openai" {
				t.Errorf("failure = %s/%s, want openai/%s (err %v)", me.Provider, me.Failure, tc.want, err)
			}
			switch {
			case tc.retryAfter >= 0 && me.RetryAfter != tc.retryAfter:
				t.Errorf("RetryAfter = %v, want %v", me.RetryAfter, tc.retryAfter)
			case tc.retryAfter < 0 && me.RetryAfter < -tc.retryAfter:
				t.Errorf("RetryAfter = %v, want at least %v", me.RetryAfter, -tc.retryAfter)
			}
			if n := len(srv.Requests()); n != 1 {
				t.Errorf("%d requests, want 1 (retries disabled)", n)
			}
		})
	}
}

func TestTimeoutIsPrompt(t *testing.T) {
	srv := llmtest.NewOpenAIServer(t)
	srv.Enqueue(llmtest.Hang(), llmtest.Hang())
	// Default retries (1): the per-call timeout still bounds the whole call.
	m := newModel(t, srv, func(c *openai.Config) { c.Timeout = 200 * time.Millisecond; c.MaxRetries = 0 })
	start := time.Now()
	_, err := m.Step(context.Background(), core.View{Messages: []core.Message{{Role: core.RoleUser, Text: "hi"}}})
	elapsed := time.Since(start)
	me, ok := core.AsModelError(err)
	if !ok || me.Failure != core.FailTimeout {
		t.Fatalf("err = %v, want FailTimeout", err)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err %v does not wrap context.DeadlineExceeded", err)
	}
	if elapsed > 2*time.Second {
		t.Errorf("timeout took %v", elapsed)
	}
}

func TestCallerDeadlineIsTimeout(t *testing.T) {
	srv := llmtest.NewOpenAIServer(t)
	srv.Enqueue(llmtest.Hang())
	m := newModel(t, srv, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	_, err := m.Step(ctx, core.View{Messages: []core.Message{{Role: core.RoleUser, Text: "hi"}}})
	if me, ok := core.AsModelError(err); !ok || me.Failure != core.FailTimeout {
		t.Fatalf("err = %v, want FailTimeout", err)
	}
}

func TestCallerCancelIsNotAModelFailure(t *testing.T) {
	srv := llmtest.NewOpenAIServer(t)
	srv.Enqueue(llmtest.Hang())
	m := newModel(t, srv, nil)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	_, err := m.Step(ctx, core.View{Messages: []core.Message{{Role: core.RoleUser, Text: "hi"}}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if _, ok := core.AsModelError(err); ok {
		t.Errorf("a cancellation must not be a *core.ModelError: %v", err)
	}
}

func TestConnectionRefusedIsUnavailable(t *testing.T) {
	url, err := llmtest.RefusedURL()
	if err != nil {
		t.Fatal(err)
	}
	m, err := openai.New(openai.Config{BaseURL: url + "/v1", Model: "m", MaxRetries: openai.NoRetries})
	if err != nil {
		t.Fatal(err)
	}
	_, err = m.Step(context.Background(), core.View{Messages: []core.Message{{Role: core.RoleUser, Text: "hi"}}})
	if me, ok := core.AsModelError(err); !ok || me.Failure != core.FailUnavailable || !me.Transient() {
		t.Fatalf("err = %v, want transient FailUnavailable", err)
	}
}

func TestSDKRetriesAreBounded(t *testing.T) {
	t.Run("default is one retry", func(t *testing.T) {
		srv := llmtest.NewOpenAIServer(t)
		srv.Enqueue(llmtest.Error(500, "a"), llmtest.Error(500, "b"), llmtest.Text("too late"))
		m := newModel(t, srv, func(c *openai.Config) { c.MaxRetries = 0; c.MaxRetryDelay = 50 * time.Millisecond })
		_, err := m.Step(context.Background(), core.View{Messages: []core.Message{{Role: core.RoleUser, Text: "hi"}}})
		if me, ok := core.AsModelError(err); !ok || me.Failure != core.FailUnavailable {
			t.Fatalf("err = %v, want FailUnavailable", err)
		}
		if n := len(srv.Requests()); n != 2 {
			t.Errorf("%d requests, want 2 (one retry)", n)
		}
	})
	t.Run("a retry that succeeds", func(t *testing.T) {
		srv := llmtest.NewOpenAIServer(t)
		srv.Enqueue(llmtest.Error(503, "a"), llmtest.Text("second time lucky"))
		m := newModel(t, srv, func(c *openai.Config) { c.MaxRetries = 0; c.MaxRetryDelay = 50 * time.Millisecond })
		r, err := m.Step(context.Background(), core.View{Messages: []core.Message{{Role: core.RoleUser, Text: "hi"}}})
		if err != nil || r.Text != "second time lucky" {
			t.Fatalf("Step = %+v, %v", r, err)
		}
	})
	t.Run("long Retry-After is returned, not waited for", func(t *testing.T) {
		srv := llmtest.NewOpenAIServer(t)
		srv.Enqueue(llmtest.RateLimited("30"), llmtest.Text("too late"))
		m := newModel(t, srv, func(c *openai.Config) { c.MaxRetries = 3 })
		start := time.Now()
		_, err := m.Step(context.Background(), core.View{Messages: []core.Message{{Role: core.RoleUser, Text: "hi"}}})
		me, ok := core.AsModelError(err)
		if !ok || me.Failure != core.FailRateLimited || me.RetryAfter != 30*time.Second {
			t.Fatalf("err = %v, want FailRateLimited after 30s", err)
		}
		if n := len(srv.Requests()); n != 1 {
			t.Errorf("%d requests, want 1", n)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("took %v", d)
		}
	})
}

func TestAPIKeyAndEnvironmentIsolation(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-from-environment")
	t.Setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/should-not-be-used")
	t.Setenv("OPENAI_ORG_ID", "org-from-environment")

	srv := llmtest.NewOpenAIServer(t)
	noKey := newModel(t, srv, nil)
	withKey := newModel(t, srv, func(c *openai.Config) {
		c.APIKey = "sk-configured"
		c.Headers = map[string]string{"HTTP-Referer": "https://marlowe.example"}
	})
	view := core.View{Messages: []core.Message{{Role: core.RoleUser, Text: "hi"}}}
	if _, err := noKey.Step(context.Background(), view); err != nil {
		t.Fatalf("Step without key: %v", err)
	}
	if _, err := withKey.Step(context.Background(), view); err != nil {
		t.Fatalf("Step with key: %v", err)
	}
	reqs := srv.Requests()
	if got := reqs[0].Header.Get("Authorization"); got != "" {
		t.Errorf("without a configured key, Authorization = %q (leaked from the environment?)", got)
	}
	if got := reqs[0].Header.Get("OpenAI-Organization"); got != "" {
		t.Errorf("OpenAI-Organization = %q leaked from the environment", got)
	}
	if got := reqs[1].Header.Get("Authorization"); got != "Bearer sk-configured" {
		t.Errorf("Authorization = %q", got)
	}
	if got := reqs[1].Header.Get("HTTP-Referer"); got != "https://marlowe.example" {
		t.Errorf("extra header = %q", got)
	}
}

func TestMaxTokensField(t *testing.T) {
	srv := llmtest.NewOpenAIServer(t)
	m := newModel(t, srv, func(c *openai.Config) { c.MaxTokensField = openai.MaxCompletionTokensField })
	if _, err := m.Step(context.Background(), core.View{Messages: []core.Message{{Role: core.RoleUser, Text: "hi"}}, MaxTokens: 99}); err != nil {
		t.Fatal(err)
	}
	req := chatRequests(t, srv)[0]
	if req.MaxCompletionTokens == nil || *req.MaxCompletionTokens != 99 || req.MaxTokens != nil {
		t.Errorf("max_completion_tokens=%v max_tokens=%v", req.MaxCompletionTokens, req.MaxTokens)
	}
	if _, err := openai.New(openai.Config{Model: "m", MaxTokensField: "bogus"}); err == nil {
		t.Error("unknown MaxTokensField accepted")
	}
}

func TestBadViewIsBadRequestWithoutACall(t *testing.T) {
	cases := map[string]core.View{
		"unknown role":           {Messages: []core.Message{{Role: "robot", Text: "x"}}},
		"tool result without id": {Messages: []core.Message{{Role: core.RoleTool, Text: "x"}}},
		"invalid schema":         {Messages: []core.Message{{Role: core.RoleUser, Text: "x"}}, Tools: []core.ToolSpec{{Name: "t", Schema: json.RawMessage(`{"type":`)}}},
		"schema not an object":   {Messages: []core.Message{{Role: core.RoleUser, Text: "x"}}, Tools: []core.ToolSpec{{Name: "t", Schema: json.RawMessage(`[1,2]`)}}},
	}
	for name, v := range cases {
		t.Run(name, func(t *testing.T) {
			srv := llmtest.NewOpenAIServer(t)
			m := newModel(t, srv, nil)
			_, err := m.Step(context.Background(), v)
			if me, ok := core.AsModelError(err); !ok || me.Failure != core.FailBadRequest || me.Transient() {
				t.Fatalf("err = %v, want FailBadRequest", err)
			}
			if n := len(srv.Requests()); n != 0 {
				t.Errorf("%d requests sent for a bad view", n)
			}
		})
	}
}

func TestConfigValidation(t *testing.T) {
	for name, cfg := range map[string]openai.Config{
		"no model":   {BaseURL: "http://localhost:1/v1"},
		"bad scheme": {BaseURL: "ftp://example.com", Model: "m"},
		"no host":    {BaseURL: "http:///v1", Model: "m"},
		"not a URL":  {BaseURL: "::", Model: "m"},
	} {
		if _, err := openai.New(cfg); err == nil {
			t.Errorf("%s: New accepted %+v", name, cfg)
		}
		if _, err := openai.NewEmbedder(cfg); err == nil {
			t.Errorf("%s: NewEmbedder accepted %+v", name, cfg)
		}
	}
}

func TestEmbed(t *testing.T) {
	srv := llmtest.NewOpenAIServer(t)
	srv.SetDims(16)
	e, err := openai.NewEmbedder(openai.Config{BaseURL: srv.URL, Model: "embed-small", MaxRetries: openai.NoRetries})
	if err != nil {
		t.Fatal(err)
	}
	texts := []string{"alpha", "beta", "alpha"}
	vecs, model, err := e.Embed(context.Background(), texts)
	if err != nil {
		t.Fatalf("Embed: %v", err)
	}
	if model != "embed-small" {
		t.Errorf("model = %q", model)
	}
	if len(vecs) != 3 {
		t.Fatalf("%d vectors", len(vecs))
	}
	for i, v := range vecs {
		if want := llmtest.HashVector(texts[i], 16); !reflect.DeepEqual(v, want) {
			t.Errorf("vector %d = %v, want %v", i, v, want)
		}
	}
	if !reflect.DeepEqual(vecs[0], vecs[2]) || reflect.DeepEqual(vecs[0], vecs[1]) {
		t.Error("vectors are not deterministic per text")
	}
	var body struct {
		Model string   `json:"model"`
		Input []string `json:"input"`
	}
	reqs := srv.Requests()
	if err := reqs[0].Decode(&body); err != nil {
		t.Fatal(err)
	}
	if body.Model != "embed-small" || !reflect.DeepEqual(body.Input, texts) || !strings.HasSuffix(reqs[0].Path, "/v1/embeddings") {
		t.Errorf("request = %s %+v", reqs[0].Path, body)
	}

	// Nothing to embed: no call.
	if vecs, _, err := e.Embed(context.Background(), nil); err != nil || vecs != nil {
		t.Errorf("Embed(nil) = %v, %v", vecs, err)
	}
	if n := len(srv.Requests()); n != 1 {
		t.Errorf("%d requests, want 1", n)
	}
}

func TestEmbedOutOfOrderAndFailures(t *testing.T) {
	srv := llmtest.NewOpenAIServer(t)
	e, err := openai.NewEmbedder(openai.Config{BaseURL: srv.URL, Model: "embed", MaxRetries: openai.NoRetries})
	if err != nil {
		t.Fatal(err)
	}
	srv.EnqueueEmbeddings(llmtest.Raw(200, `{"object":"list","model":"embed-v2","data":[
		{"object":"embedding","index":1,"embedding":[0.5,0.25]},
		{"object":"embedding","index":0,"embedding":[1,0]}]}`))
	vecs, model, err := e.Embed(context.Background(), []string{"a", "b"})
	if err != nil {
		t.Fatal(err)
	}
	if want := [][]float32{{1, 0}, {0.5, 0.25}}; !reflect.DeepEqual(vecs, want) || model != "embed-v2" {
		t.Errorf("Embed = %v %q, want %v by index", vecs, model, want)
	}

	for name, tc := range map[string]struct {
		resp llmtest.Response
		want core.ModelFailure
	}{
		"500":          {llmtest.Error(500, "x"), core.FailUnavailable},
		"429":          {llmtest.RateLimited("3"), core.FailRateLimited},
		"wrong count":  {llmtest.Vectors([]float32{1, 2}), core.FailBadResponse},
		"unparseable":  {llmtest.Raw(200, `{"data":[{`), core.FailBadResponse},
		"empty vector": {llmtest.Raw(200, `{"data":[{"index":0,"embedding":[]},{"index":1,"embedding":[1]}]}`), core.FailBadResponse},
	} {
		srv.EnqueueEmbeddings(tc.resp)
		_, _, err := e.Embed(context.Background(), []string{"a", "b"})
		if me, ok := core.AsModelError(err); !ok || me.Failure != tc.want {
			t.Errorf("%s: err = %v, want %s", name, err, tc.want)
		}
	}
}

func TestDefaultFakeAnswerEchoes(t *testing.T) {
	srv := llmtest.NewOpenAIServer(t)
	m := newModel(t, srv, nil)
	r, err := m.Step(context.Background(), core.View{Messages: []core.Message{{Role: core.RoleUser, Text: "ping   pong"}}})
	if err != nil {
		t.Fatal(err)
	}
	if r.Text != "You said: ping pong" || r.Usage.InputTokens == 0 || r.Usage.OutputTokens == 0 {
		t.Errorf("reply = %+v", r)
	}
}

func TestConcurrentSteps(t *testing.T) {
	srv := llmtest.NewOpenAIServer(t)
	m := newModel(t, srv, nil)
	errs := make(chan error, 16)
	for i := range 16 {
		go func() {
			text := strings.Repeat("x", i+1)
			r, err := m.Step(context.Background(), core.View{Messages: []core.Message{{Role: core.RoleUser, Text: text}}})
			if err == nil && r.Text != "You said: "+text {
				err = errors.New("crossed reply: " + r.Text)
			}
			errs <- err
		}()
	}
	for range 16 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}
