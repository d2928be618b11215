package llmtest_test

import (
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/llm/llmtest"
)

func post(t *testing.T, url, body string) (*http.Response, map[string]any) {
	t.Helper()
	res, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(res.Body).Decode(&out); err != nil {
		t.Fatalf("decode: %v", err)
	}
	return res, out
}

func TestOpenAIDefaults(t *testing.T) {
	srv := llmtest.NewOpenAIServer(t)
	res, out := post(t, srv.URL+"/chat/completions", `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"knock knock"}]}]}`)
	if res.StatusCode != 200 {
		t.Fatalf("status %d: %v", res.StatusCode, out)
	}
	msg := out["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)
	if msg["content"] != "You said: knock knock" || out["model"] != "m" {
		t.Errorf("answer = %v", out)
	}

	sres, err := http.Post(srv.URL+"/chat/completions", "application/json", strings.NewReader(`{"model":"m","stream":true,"messages":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(sres.Body)
	sres.Body.Close()
	if ct := sres.Header.Get("Content-Type"); sres.StatusCode != 200 || ct != "text/event-stream" || !strings.HasSuffix(string(body), "data: [DONE]\n\n") {
		t.Errorf("streaming: %d %s %q", sres.StatusCode, ct, body)
	}
	res, out = post(t, srv.URL+"/nope", `{}`)
	if res.StatusCode != 404 || out["error"] == nil {
		t.Errorf("unknown route: %d %v", res.StatusCode, out)
	}
	if n := len(srv.Requests()); n != 3 {
		t.Errorf("%d requests recorded", n)
	}
	reqs, err := srv.ChatRequests()
	if err != nil || len(reqs) != 2 || reqs[0].Messages[0].Text() != "knock knock" {
		t.Errorf("ChatRequests = %+v, %v", reqs, err)
	}
}

func TestAnthropicDefaultsAndToolArgs(t *testing.T) {
	srv := llmtest.NewAnthropicServer(t)
	srv.Enqueue(llmtest.Tools(llmtest.Call("", "a", `{"x":1}`), llmtest.Call("", "b", `not json`)))
	_, out := post(t, srv.URL+"/v1/messages", `{"model":"c","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`)
	content := out["content"].([]any)
	first, second := content[0].(map[string]any), content[1].(map[string]any)
	if first["id"] != "call_1" || second["id"] != "call_2" || out["stop_reason"] != "tool_use" {
		t.Errorf("answer = %v", out)
	}
	if second["input"] != "not json" {
		t.Errorf("non-JSON args should be sent as a JSON string: %v", second["input"])
	}
	_, out = post(t, srv.URL+"/v1/messages", `{"model":"c","max_tokens":5,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"call_1","content":"42"}]}]}`)
	if text := out["content"].([]any)[0].(map[string]any)["text"]; text != "The tool answered: 42" {
		t.Errorf("default answer = %v", text)
	}
}

func TestReleaseUnblocksHangingRequests(t *testing.T) {
	f := llmtest.NewOpenAI()
	srv := httptest.NewServer(f)
	defer srv.Close()
	f.Enqueue(llmtest.Hang())
	done := make(chan int, 1)
	go func() {
		res, err := http.Post(srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(`{"model":"m","messages":[]}`))
		if err != nil {
			done <- -1
			return
		}
		res.Body.Close()
		done <- res.StatusCode
	}()
	time.Sleep(50 * time.Millisecond)
	f.Release()
	select {
	case code := <-done:
		if code != http.StatusServiceUnavailable {
			t.Errorf("status %d", code)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("hanging request not released")
	}
}

func TestHashVectorIsUnitAndDeterministic(t *testing.T) {
	a, b := llmtest.HashVector("hello", 32), llmtest.HashVector("hello", 32)
	var norm float64
	for i := range a {
		if a[i] != b[i] {
			t.Fatal("not deterministic")
		}
		norm += float64(a[i]) * float64(a[i])
	}
	if math.Abs(norm-1) > 1e-5 {
		t.Errorf("norm² = %v", norm)
	}
}

func TestRefusedURL(t *testing.T) {
	u, err := llmtest.RefusedURL()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := http.Get(u); err == nil {
		t.Error("something answered on the refused URL")
	}
}
