package core

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Role is who said a message in a model view.
type Role string

const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// Message is one turn of the volatile tier of a view.
type Message struct {
	Role       Role       `json:"role"`
	Text       string     `json:"text,omitempty"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`   // assistant turns
	ToolCallID string     `json:"tool_call_id,omitempty"` // tool turns: which call this answers
	Name       string     `json:"name,omitempty"`         // tool turns: tool name
	// Images go with a user turn as image parts (a person's shared
	// screenshots), after its text. Their bytes are never serialised.
	Images []ImagePart `json:"images,omitempty"`
}

// ImagePart is one image in a model view.
type ImagePart struct {
	Type   string `json:"type"`   // image/jpeg | image/png | image/gif | image/webp
	SHA256 string `json:"sha256"` // names the bytes in the blob store
	Data   []byte `json:"-"`
}

// ToolSpec is what the model is told about a tool.
type ToolSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Schema      json.RawMessage `json:"schema"`
}

// View is everything one model call sees, assembled by the run loop:
// System carries the stable tier (identity, channel policy, constraints),
// Tools the context tier, Messages the volatile tier.
type View struct {
	System    string     `json:"system"`
	Messages  []Message  `json:"messages"`
	Tools     []ToolSpec `json:"tools,omitempty"`
	MaxTokens int        `json:"max_tokens,omitempty"`
}

// Reply is one model step: final text, or tool calls (or both).
type Reply struct {
	Text      string     `json:"text,omitempty"`
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	Usage     Usage      `json:"usage"`
	Provider  string     `json:"provider,omitempty"`
	Model     string     `json:"model,omitempty"`
}

// Model is a chat model with tool calling. Implementations in llm/.
type Model interface {
	Step(ctx context.Context, v View) (Reply, error)
}

// StreamingModel is a Model that can also stream a step's reply: text is
// called with the reply's text so far (the whole text, not a delta, so a
// repeat is harmless) as it arrives, and never after StepStream returns.
// hasCalls reports whether the reply has begun a tool call (its text is
// then not the answer). The Reply returned is what Step would return for
// the same response; errors are the same *ModelError classes. The engine
// calls Step only: nothing a model writes is shown before its step is
// journaled and its calls decided (engine/modelstep.go).
type StreamingModel interface {
	Model
	StepStream(ctx context.Context, v View, text func(soFar string, hasCalls bool)) (Reply, error)
}

// Embedder turns texts into vectors; model names the embedding model so
// vector rows record it.
type Embedder interface {
	Embed(ctx context.Context, texts []string) (vectors [][]float32, model string, err error)
}

// ModelFailure classifies why a model call failed; the loop and failover
// decide on it, never on error strings.
type ModelFailure string

const (
	FailRateLimited ModelFailure = "rate-limited" // 429; RetryAfter may be set
	FailUnavailable ModelFailure = "unavailable"  // 5xx, connection refused
	FailTimeout     ModelFailure = "timeout"
	FailAuth        ModelFailure = "auth"        // 401/403: configuration, not transient
	FailBadRequest  ModelFailure = "bad-request" // 400: our request was refused
	FailBadResponse ModelFailure = "bad-response"
)

// ModelError is the error every provider returns for a failed call.
type ModelError struct {
	Provider   string
	Failure    ModelFailure
	RetryAfter time.Duration
	Err        error
	// Status is the HTTP status the server answered with (0: no answer).
	Status int
	// Host is the base URL's host[:port], so an operator sees which
	// endpoint failed; Hint the likely cause and the setting to check.
	// Both are optional and never hold secrets.
	Host string
	Hint string
}

func (e *ModelError) Error() string {
	return fmt.Sprintf("model %s: %s: %v", e.Source(), e.Failure, e.Err) + e.LikelyCause()
}

// LikelyCause is "; likely cause: <hint>", or "" without a hint, to end a
// sentence shown to people.
func (e *ModelError) LikelyCause() string {
	if e.Hint == "" {
		return ""
	}
	return "; likely cause: " + e.Hint
}

// Source names the failed endpoint for people: "openai at 127.0.0.1:11434".
func (e *ModelError) Source() string {
	p := e.Provider
	if p == "" {
		p = "the model provider"
	}
	if e.Host != "" {
		p += " at " + e.Host
	}
	return p
}
func (e *ModelError) Unwrap() error { return e.Err }

// Transient reports whether another provider (or a later retry) may succeed.
func (e *ModelError) Transient() bool {
	switch e.Failure {
	case FailRateLimited, FailUnavailable, FailTimeout, FailBadResponse:
		return true
	}
	return false
}

// AsModelError extracts a *ModelError from err.
func AsModelError(err error) (*ModelError, bool) {
	var me *ModelError
	ok := errors.As(err, &me)
	return me, ok
}
