// Package anthropic is the core.Model over Anthropic's Messages API, built on
// the official SDK github.com/anthropics/anthropic-sdk-go/v2: tools as
// tool_use / tool_result blocks.
//
// The SDK's client is constructed with option.WithoutEnvironmentDefaults: the
// base URL and API key come from Config, never from ANTHROPIC_* variables or
// profile files read behind the caller's back.
package anthropic

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/llm/internal/provider"
)

// ProviderName is the default Reply.Provider and ModelError.Provider.
const ProviderName = "anthropic"

// DefaultBaseURL is Anthropic's API.
const DefaultBaseURL = "https://api.anthropic.com"

// DefaultMaxTokens is sent when the view sets no MaxTokens (the API requires one).
const DefaultMaxTokens = 4096

// NoRetries, as Config.MaxRetries, disables the SDK's own retries.
const NoRetries = provider.NoRetries

// Config configures a Model.
type Config struct {
	// BaseURL of the API, without the /v1 path. Default DefaultBaseURL.
	BaseURL string
	// APIKey; empty sends none (a proxy that adds its own).
	APIKey string
	// Model, e.g. "claude-sonnet-4-5". Required.
	Model string
	// Timeout bounds one Step, SDK retries included. Default 60s.
	Timeout time.Duration
	// MaxRetries is how often the SDK itself retries a transient failure
	// before returning it. 0 means the default (1); NoRetries means none.
	MaxRetries int
	// MaxRetryDelay: a server asking for a longer Retry-After is not retried
	// by the SDK but returned at once. Default 2s.
	MaxRetryDelay time.Duration
	// MaxTokens when the view sets none. Default DefaultMaxTokens.
	MaxTokens int
	// HTTPClient to use; default a client of its own over http.DefaultTransport.
	HTTPClient *http.Client
	// Provider overrides ProviderName in replies and errors.
	Provider string
	// Explain, when set, sees every *core.ModelError before Step returns it
	// (llm fills in the endpoint and the likely cause).
	Explain func(*core.ModelError)
	// Headers are added to every request.
	Headers map[string]string
}

// Model is a core.Model over the Messages API. It is safe for concurrent use.
type Model struct {
	msgs      sdk.MessageService
	model     string
	name      string
	timeout   time.Duration
	maxTokens int
	explain   func(*core.ModelError)
}

var _ core.Model = (*Model)(nil)

// New returns a Model for cfg.
func New(cfg Config) (*Model, error) {
	base := cfg.BaseURL
	if base == "" {
		base = DefaultBaseURL
	}
	if err := provider.CheckEndpoint(cfg.Model, base); err != nil {
		return nil, fmt.Errorf("anthropic: %w", err)
	}
	opts := []option.RequestOption{
		option.WithoutEnvironmentDefaults(),
		option.WithHTTPClient(provider.HTTPClient(cfg.HTTPClient)),
		option.WithBaseURL(base),
		option.WithMaxRetries(provider.Retries(cfg.MaxRetries)),
		option.WithMiddleware(provider.CapRetryDelay(provider.Or(cfg.MaxRetryDelay, provider.DefaultMaxRetryDelay))),
	}
	if cfg.APIKey != "" {
		opts = append(opts, option.WithAPIKey(cfg.APIKey))
	}
	for k, v := range cfg.Headers {
		opts = append(opts, option.WithHeader(k, v))
	}
	client := sdk.NewClient(opts...)
	name := cfg.Provider
	if name == "" {
		name = ProviderName
	}
	maxTokens := cfg.MaxTokens
	if maxTokens <= 0 {
		maxTokens = DefaultMaxTokens
	}
	return &Model{
		msgs:      client.Messages,
		model:     cfg.Model,
		name:      name,
		timeout:   provider.Or(cfg.Timeout, provider.DefaultTimeout),
		maxTokens: maxTokens,
		explain:   cfg.Explain,
	}, nil
}

// Name is the provider label the model puts on replies and errors.
func (m *Model) Name() string { return m.name }

// ModelName is the configured model.
func (m *Model) ModelName() string { return m.model }

// Step sends v to the Messages API and maps the answer.
func (m *Model) Step(ctx context.Context, v core.View) (core.Reply, error) {
	params, err := m.request(v)
	if err != nil {
		return core.Reply{}, provider.Explain(provider.BadRequest(m.name, err), m.explain)
	}
	callCtx, cancel := context.WithTimeout(ctx, m.timeout)
	defer cancel()
	var raw *http.Response
	// The per-attempt timeout is ours too: without one the SDK derives it from
	// max_tokens and refuses large values outright ("streaming is required").
	res, err := m.msgs.New(callCtx, params, option.WithResponseInto(&raw), option.WithRequestTimeout(m.timeout))
	if err != nil {
		return core.Reply{}, provider.Explain(classify(m.name, ctx, callCtx, err, raw), m.explain)
	}
	r, err := m.reply(res)
	return r, provider.Explain(err, m.explain)
}

// classify maps an SDK error onto the core failure kinds.
func classify(name string, callerCtx, callCtx context.Context, err error, raw *http.Response) error {
	var api *provider.APIError
	if e, ok := errors.AsType[*sdk.Error](err); ok {
		api = &provider.APIError{Status: e.StatusCode, Response: e.Response, Message: e.Message}
	}
	return provider.Classify(name, callerCtx, callCtx, provider.NewHTTPFailure(err, api, raw))
}

var _ core.StreamingModel = (*Model)(nil)

// StepStream implements core.StreamingModel with a streamed Messages call:
// the events are accumulated by the SDK's Message.Accumulate and text sees
// the text blocks so far after each event that grows them. A stream that
// ends before message_stop's stop_reason is a lost connection: a
// transient failure, never a short answer.
func (m *Model) StepStream(ctx context.Context, v core.View, text func(string, bool)) (core.Reply, error) {
	params, err := m.request(v)
	if err != nil {
		return core.Reply{}, provider.Explain(provider.BadRequest(m.name, err), m.explain)
	}
	callCtx, cancel := context.WithTimeout(ctx, m.timeout)
	defer cancel()
	var raw *http.Response
	stream := m.msgs.NewStreaming(callCtx, params, option.WithResponseInto(&raw), option.WithRequestTimeout(m.timeout))
	defer stream.Close()
	var msg sdk.Message
	shown, calls, events := "", false, 0
	for stream.Next() {
		events++
		if err := msg.Accumulate(stream.Current()); err != nil {
			return core.Reply{}, provider.Explain(provider.BadResponse(m.name, "stream: %v", err), m.explain)
		}
		var b strings.Builder
		c := false
		for _, block := range msg.Content {
			switch block.Type {
			case "text":
				b.WriteString(block.Text)
			case "tool_use":
				c = true
			}
		}
		if s := b.String(); s != shown || c != calls {
			shown, calls = s, c
			text(shown, calls)
		}
	}
	if err := stream.Err(); err != nil {
		return core.Reply{}, provider.Explain(classify(m.name, ctx, callCtx, err, raw), m.explain)
	}
	if events == 0 && ctx.Err() == nil {
		// Not a stream at all: a server that answers whole. Ask it the
		// ordinary way.
		return m.Step(ctx, v)
	}
	if msg.StopReason == "" {
		return core.Reply{}, provider.Explain(&core.ModelError{Provider: m.name, Failure: core.FailUnavailable,
			Err: errors.New("the stream ended before the answer did")}, m.explain)
	}
	r, err := m.reply(&msg)
	return r, provider.Explain(err, m.explain)
}
