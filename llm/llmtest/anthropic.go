package llmtest

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

const anthropicMessages = "messages"

// Anthropic is a fake Anthropic Messages API as an http.Handler: POST
// .../v1/messages.
type Anthropic struct {
	fake
}

// NewAnthropic returns a fake Anthropic handler.
func NewAnthropic() *Anthropic {
	f := &Anthropic{}
	f.init()
	return f
}

// Enqueue queues answers for messages requests.
func (f *Anthropic) Enqueue(rs ...Response) { f.enqueue(anthropicMessages, rs) }

// Pending is how many queued answers are left.
func (f *Anthropic) Pending() int { return f.pending(anthropicMessages) }

// MessageRequests decodes every messages request received so far.
func (f *Anthropic) MessageRequests() ([]AnthropicRequest, error) {
	var out []AnthropicRequest
	for _, r := range f.Requests() {
		if !strings.HasSuffix(r.Path, "/messages") {
			continue
		}
		var a AnthropicRequest
		if err := r.Decode(&a); err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

// ServeHTTP implements http.Handler.
func (f *Anthropic) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	req, err := f.record(r)
	if err != nil {
		anthropicError(w, http.StatusBadRequest, nil, "cannot read body: "+err.Error())
		return
	}
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/v1/messages") {
		anthropicError(w, http.StatusNotFound, nil, "no route for "+r.Method+" "+r.URL.Path)
		return
	}
	var in AnthropicRequest
	if err := req.Decode(&in); err != nil {
		anthropicError(w, http.StatusBadRequest, nil, "invalid JSON body: "+err.Error())
		return
	}
	if f.refusesImages() {
		for _, m := range in.Messages {
			if len(m.Images()) > 0 {
				anthropicError(w, http.StatusBadRequest, nil, "messages: this model does not support image input")
				return
			}
		}
	}
	resp, ok := f.next(r, anthropicMessages)
	if !ok {
		resp = Text(defaultAnthropicText(in))
	}
	if !f.wait(r, resp) {
		anthropicError(w, http.StatusServiceUnavailable, nil, "gave up")
		return
	}
	if resp.Body != "" {
		writeRaw(w, resp)
		return
	}
	if status(resp) >= 400 {
		anthropicError(w, status(resp), resp.Header, resp.ErrorMessage)
		return
	}
	content := []map[string]any{}
	if resp.Text != "" {
		content = append(content, map[string]any{"type": "text", "text": resp.Text})
	}
	stop := "end_turn"
	for _, c := range resp.ToolCalls {
		stop = "tool_use"
		content = append(content, map[string]any{
			"type": "tool_use", "id": f.callID(c.ID), "name": c.Name, "input": rawArgs(c.Args),
		})
	}
	model := resp.Model
	if model == "" {
		model = in.Model
	}
	usage := resp.Usage
	if usage == (Usage{}) {
		usage = Usage{InputTokens: estimate(len(req.Body)), OutputTokens: estimate(len(resp.Text))}
	}
	if in.Stream {
		f.stream(w, r, resp, model, usage)
		return
	}
	writeJSON(w, status(resp), resp.Header, map[string]any{
		"id": "msg_fake", "type": "message", "role": "assistant", "model": model,
		"content": content, "stop_reason": stop, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": usage.InputTokens, "output_tokens": usage.OutputTokens},
	})
}

func defaultAnthropicText(in AnthropicRequest) string {
	for i := len(in.Messages) - 1; i >= 0; i-- {
		m := in.Messages[i]
		for j := len(m.Content) - 1; j >= 0; j-- {
			b := m.Content[j]
			switch {
			case m.Role == "user" && b.Type == "tool_result":
				return echo("tool", b.ResultText())
			case m.Role == "user" && b.Type == "text":
				return echo("user", b.Text)
			}
		}
	}
	return echo("", "")
}

func anthropicError(w http.ResponseWriter, code int, extra http.Header, msg string) {
	if msg == "" {
		msg = http.StatusText(code)
	}
	typ := "invalid_request_error"
	switch {
	case code == http.StatusTooManyRequests:
		typ = "rate_limit_error"
	case code == http.StatusUnauthorized:
		typ = "authentication_error"
	case code == http.StatusForbidden:
		typ = "permission_error"
	case code == 529:
		typ = "overloaded_error"
	case code >= 500:
		typ = "api_error"
	}
	writeJSON(w, code, extra, map[string]any{
		"type": "error", "error": map[string]any{"type": typ, "message": msg},
	})
}

// AnthropicServer is an Anthropic fake on a local test server.
type AnthropicServer struct {
	*Anthropic
	// URL is the base URL to configure a client with (without /v1).
	URL    string
	Server *httptest.Server
}

// NewAnthropicServer starts an Anthropic fake; it is closed when the test ends.
func NewAnthropicServer(t testing.TB) *AnthropicServer {
	t.Helper()
	f := NewAnthropic()
	srv := httptest.NewServer(f)
	t.Cleanup(func() {
		f.Release()
		srv.Close()
	})
	return &AnthropicServer{Anthropic: f, URL: srv.URL, Server: srv}
}

// AnthropicRequest is a messages request as the fake decoded it.
type AnthropicRequest struct {
	Model     string             `json:"model"`
	MaxTokens int64              `json:"max_tokens"`
	System    json.RawMessage    `json:"system"`
	Messages  []AnthropicMessage `json:"messages"`
	Tools     []AnthropicTool    `json:"tools"`
	Stream    bool               `json:"stream"`
}

// SystemText is the system prompt: the string, or its text blocks joined.
func (r AnthropicRequest) SystemText() string { return blocksText(r.System) }

// AnthropicMessage is one message of a messages request. A string content is
// decoded as one text block.
type AnthropicMessage struct {
	Role    string           `json:"role"`
	Content []AnthropicBlock `json:"content"`
}

// UnmarshalJSON accepts content as a string or a list of blocks.
func (m *AnthropicMessage) UnmarshalJSON(b []byte) error {
	var raw struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	m.Role = raw.Role
	var s string
	if json.Unmarshal(raw.Content, &s) == nil {
		m.Content = []AnthropicBlock{{Type: "text", Text: s}}
		return nil
	}
	return json.Unmarshal(raw.Content, &m.Content)
}

// AnthropicBlock is one content block (text, tool_use or tool_result).
type AnthropicBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   json.RawMessage `json:"content,omitempty"`
	IsError   bool            `json:"is_error,omitempty"`
	// Source is an image block's picture.
	Source *struct {
		Type      string `json:"type"`
		MediaType string `json:"media_type"`
		Data      string `json:"data"`
	} `json:"source,omitempty"`
}

// Images are the message's image blocks with base64 sources, decoded.
func (m AnthropicMessage) Images() []Image {
	var out []Image
	for _, b := range m.Content {
		if b.Type != "image" || b.Source == nil || b.Source.Type != "base64" {
			continue
		}
		if d, err := base64.StdEncoding.DecodeString(b.Source.Data); err == nil {
			out = append(out, Image{Type: b.Source.MediaType, Data: d})
		}
	}
	return out
}

// ResultText is a tool_result block's content: the string, or its text
// blocks joined.
func (b AnthropicBlock) ResultText() string { return blocksText(b.Content) }

// AnthropicTool is a tool offered in a messages request.
type AnthropicTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
}

func blocksText(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var blocks []AnthropicBlock
	if json.Unmarshal(raw, &blocks) != nil {
		return ""
	}
	var b strings.Builder
	for _, bl := range blocks {
		b.WriteString(bl.Text)
	}
	return b.String()
}
