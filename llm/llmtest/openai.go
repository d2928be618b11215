package llmtest

import (
	"encoding/base64"
	"encoding/json"
	"hash/fnv"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

const (
	openAIChat   = "chat"
	openAIEmbed  = "embed"
	defaultModel = "fake-model"
)

// OpenAI is a fake OpenAI-compatible API as an http.Handler. It serves, under
// any prefix (mount it at /v1 or anywhere): POST .../chat/completions, POST
// .../embeddings and GET .../models. Use NewOpenAIServer in tests; mount
// NewOpenAI on a listener to stand in for a model endpoint by hand.
type OpenAI struct {
	fake
}

// NewOpenAI returns a fake OpenAI-compatible handler.
func NewOpenAI() *OpenAI {
	f := &OpenAI{}
	f.init()
	return f
}

// Enqueue queues answers for chat completion requests.
func (f *OpenAI) Enqueue(rs ...Response) { f.enqueue(openAIChat, rs) }

// EnqueueEmbeddings queues answers for embeddings requests.
func (f *OpenAI) EnqueueEmbeddings(rs ...Response) { f.enqueue(openAIEmbed, rs) }

// Pending is how many queued chat answers are left.
func (f *OpenAI) Pending() int { return f.pending(openAIChat) }

// ChatRequests decodes every chat completion request received so far.
func (f *OpenAI) ChatRequests() ([]OpenAIChatRequest, error) {
	var out []OpenAIChatRequest
	for _, r := range f.Requests() {
		if !strings.HasSuffix(r.Path, "/chat/completions") {
			continue
		}
		var c OpenAIChatRequest
		if err := r.Decode(&c); err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// ServeHTTP implements http.Handler.
func (f *OpenAI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	req, err := f.record(r)
	if err != nil {
		openAIError(w, http.StatusBadRequest, nil, "cannot read body: "+err.Error())
		return
	}
	switch {
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/chat/completions"):
		f.chat(w, r, req)
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/embeddings"):
		f.embed(w, r, req)
	case r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/models"):
		writeJSON(w, http.StatusOK, nil, map[string]any{
			"object": "list",
			"data":   []map[string]any{{"id": defaultModel, "object": "model", "created": 0, "owned_by": "llmtest"}},
		})
	default:
		openAIError(w, http.StatusNotFound, nil, "no route for "+r.Method+" "+r.URL.Path)
	}
}

func (f *OpenAI) chat(w http.ResponseWriter, r *http.Request, req Request) {
	var in OpenAIChatRequest
	if err := req.Decode(&in); err != nil {
		openAIError(w, http.StatusBadRequest, nil, "invalid JSON body: "+err.Error())
		return
	}
	if f.refusesImages() {
		for _, m := range in.Messages {
			if len(m.Images()) > 0 {
				openAIError(w, http.StatusBadRequest, nil, "Invalid content type. image_url is only supported by certain models.")
				return
			}
		}
	}
	resp, ok := f.next(r, openAIChat)
	if !ok {
		resp = Text(defaultChatText(in))
	}
	if !f.wait(r, resp) {
		openAIError(w, http.StatusServiceUnavailable, nil, "gave up")
		return
	}
	if resp.Body != "" {
		writeRaw(w, resp)
		return
	}
	if status(resp) >= 400 {
		openAIError(w, status(resp), resp.Header, resp.ErrorMessage)
		return
	}
	model := resp.Model
	if model == "" {
		model = in.Model
	}
	if in.Stream {
		f.stream(w, r, in, req, resp, model)
		return
	}
	msg := map[string]any{"role": "assistant", "content": resp.Text}
	finish := "stop"
	if len(resp.ToolCalls) > 0 {
		finish = "tool_calls"
		if resp.Text == "" {
			msg["content"] = nil
		}
		var calls []map[string]any
		for _, c := range resp.ToolCalls {
			calls = append(calls, map[string]any{
				"id":       f.callID(c.ID),
				"type":     "function",
				"function": map[string]any{"name": c.Name, "arguments": c.Args},
			})
		}
		msg["tool_calls"] = calls
	}
	usage := resp.Usage
	if usage == (Usage{}) {
		usage = Usage{InputTokens: estimate(len(req.Body)), OutputTokens: estimate(len(resp.Text))}
	}
	writeJSON(w, status(resp), resp.Header, map[string]any{
		"id":      "chatcmpl-fake",
		"object":  "chat.completion",
		"created": time.Now().Unix(),
		"model":   model,
		"choices": []map[string]any{{"index": 0, "message": msg, "finish_reason": finish, "logprobs": nil}},
		"usage": map[string]any{
			"prompt_tokens":     usage.InputTokens,
			"completion_tokens": usage.OutputTokens,
			"total_tokens":      usage.InputTokens + usage.OutputTokens,
		},
	})
}

func defaultChatText(in OpenAIChatRequest) string {
	for i := len(in.Messages) - 1; i >= 0; i-- {
		m := in.Messages[i]
		if m.Role == "user" || m.Role == "tool" {
			return echo(m.Role, m.Text())
		}
	}
	return echo("", "")
}

func (f *OpenAI) embed(w http.ResponseWriter, r *http.Request, req Request) {
	var in struct {
		Model string          `json:"model"`
		Input json.RawMessage `json:"input"`
	}
	if err := req.Decode(&in); err != nil {
		openAIError(w, http.StatusBadRequest, nil, "invalid JSON body: "+err.Error())
		return
	}
	var texts []string
	if err := json.Unmarshal(in.Input, &texts); err != nil {
		var one string
		if err := json.Unmarshal(in.Input, &one); err != nil {
			openAIError(w, http.StatusBadRequest, nil, "input must be a string or a list of strings")
			return
		}
		texts = []string{one}
	}
	resp, ok := f.next(r, openAIEmbed)
	if !f.wait(r, resp) {
		openAIError(w, http.StatusServiceUnavailable, nil, "gave up")
		return
	}
	if ok && resp.Body != "" {
		writeRaw(w, resp)
		return
	}
	if ok && status(resp) >= 400 {
		openAIError(w, status(resp), resp.Header, resp.ErrorMessage)
		return
	}
	vectors := resp.Vectors
	if vectors == nil {
		f.mu.Lock()
		dims := f.dims
		f.mu.Unlock()
		for _, t := range texts {
			vectors = append(vectors, HashVector(t, dims))
		}
	}
	data := make([]map[string]any, len(vectors))
	n := 0
	for i, v := range vectors {
		data[i] = map[string]any{"object": "embedding", "index": i, "embedding": v}
	}
	for _, t := range texts {
		n += estimate(len(t))
	}
	model := resp.Model
	if model == "" {
		model = in.Model
	}
	writeJSON(w, status(resp), resp.Header, map[string]any{
		"object": "list", "data": data, "model": model,
		"usage": map[string]any{"prompt_tokens": n, "total_tokens": n},
	})
}

// HashVector is the fake's default embedding: a deterministic unit vector
// derived from the text's hash.
func HashVector(text string, dims int) []float32 {
	v := make([]float32, dims)
	var norm float64
	for i := range v {
		h := fnv.New64a()
		_, _ = h.Write([]byte{byte(i), byte(i >> 8)})
		_, _ = h.Write([]byte(text))
		x := float64(h.Sum64()%2001)/1000 - 1
		v[i] = float32(x)
		norm += x * x
	}
	if norm == 0 {
		v[0], norm = 1, 1
	}
	for i := range v {
		v[i] = float32(float64(v[i]) / math.Sqrt(norm))
	}
	return v
}

func openAIError(w http.ResponseWriter, code int, extra http.Header, msg string) {
	if msg == "" {
		msg = http.StatusText(code)
	}
	typ := "invalid_request_error"
	switch {
	case code == http.StatusTooManyRequests:
		typ = "rate_limit_exceeded"
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		typ = "authentication_error"
	case code >= 500:
		typ = "server_error"
	}
	writeJSON(w, code, extra, map[string]any{
		"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": nil},
	})
}

// OpenAIServer is an OpenAI fake on a local test server.
type OpenAIServer struct {
	*OpenAI
	// URL is the base URL to configure a client with (it ends in /v1).
	URL    string
	Server *httptest.Server
}

// NewOpenAIServer starts an OpenAI fake; it is closed when the test ends.
func NewOpenAIServer(t testing.TB) *OpenAIServer {
	t.Helper()
	f := NewOpenAI()
	srv := httptest.NewServer(f)
	t.Cleanup(func() {
		f.Release()
		srv.Close()
	})
	return &OpenAIServer{OpenAI: f, URL: srv.URL + "/v1", Server: srv}
}

// OpenAIChatRequest is a chat completion request as the fake decoded it.
type OpenAIChatRequest struct {
	Model               string          `json:"model"`
	Messages            []OpenAIMessage `json:"messages"`
	Tools               []OpenAITool    `json:"tools"`
	MaxTokens           *int64          `json:"max_tokens"`
	MaxCompletionTokens *int64          `json:"max_completion_tokens"`
	Stream              bool            `json:"stream"`
	StreamOptions       struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

// OpenAIMessage is one message of a chat request.
type OpenAIMessage struct {
	Role       string           `json:"role"`
	Content    json.RawMessage  `json:"content"`
	ToolCalls  []OpenAIToolCall `json:"tool_calls"`
	ToolCallID string           `json:"tool_call_id"`
	Name       string           `json:"name"`
}

// Text is the message's content: the string, or its text parts joined.
func (m OpenAIMessage) Text() string {
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(m.Content, &parts) == nil {
		var b strings.Builder
		for _, p := range parts {
			b.WriteString(p.Text)
		}
		return b.String()
	}
	return ""
}

// Images are the message's image_url parts whose URL is a base64 data
// URL, decoded.
func (m OpenAIMessage) Images() []Image {
	var parts []struct {
		Type     string `json:"type"`
		ImageURL struct {
			URL string `json:"url"`
		} `json:"image_url"`
	}
	if json.Unmarshal(m.Content, &parts) != nil {
		return nil
	}
	var out []Image
	for _, p := range parts {
		if p.Type != "image_url" {
			continue
		}
		meta, data, ok := strings.Cut(strings.TrimPrefix(p.ImageURL.URL, "data:"), ",")
		typ, isB64 := strings.CutSuffix(meta, ";base64")
		b, err := base64.StdEncoding.DecodeString(data)
		if ok && isB64 && err == nil {
			out = append(out, Image{Type: typ, Data: b})
		}
	}
	return out
}

// OpenAIToolCall is an assistant message's tool call.
type OpenAIToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// OpenAITool is a tool offered in a chat request.
type OpenAITool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	} `json:"function"`
}
