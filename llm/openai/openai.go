// Package openai is the core.Model and core.Embedder for any OpenAI-compatible
// endpoint (OpenAI, Ollama, vLLM, llama.cpp server, OpenRouter, ...), built on
// the official SDK github.com/openai/openai-go/v3: chat completions with
// function calling, and the embeddings endpoint.
//
// The SDK's client is constructed without its environment defaults: every
// setting (base URL, API key) comes from Config, never from OPENAI_* variables
// read behind the caller's back.
package openai

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/llm/internal/provider"
)

// ProviderName is the default Reply.Provider and ModelError.Provider.
const ProviderName = "openai"

// DefaultBaseURL is OpenAI's API.
const DefaultBaseURL = "https://api.openai.com/v1"

// NoRetries, as Config.MaxRetries, disables the SDK's own retries.
const NoRetries = provider.NoRetries

// Which request field carries View.MaxTokens.
const (
	MaxTokensField           = "max_tokens"            // understood by every compatible server
	MaxCompletionTokensField = "max_completion_tokens" // what OpenAI's current models require
)

// Config configures a Model or an Embedder.
type Config struct {
	// BaseURL of the API, including its version path ("http://localhost:11434/v1").
	// Default DefaultBaseURL.
	BaseURL string
	// APIKey is sent as a bearer token; empty sends none (local servers).
	APIKey string
	// Model is the chat model (Model) or the embedding model (Embedder). Required.
	Model string
	// Timeout bounds one Step or Embed call, SDK retries included. Default 60s.
	Timeout time.Duration
	// MaxRetries is how often the SDK itself retries a transient failure
	// before returning it. 0 means the default (1); NoRetries means none.
	MaxRetries int
	// MaxRetryDelay caps the SDK's wait between retries: a server asking for a
	// longer Retry-After is not retried but returned at once. Default 2s.
	MaxRetryDelay time.Duration
	// MaxTokensField names the request field that carries View.MaxTokens:
	// MaxTokensField or MaxCompletionTokensField. Default: the latter for
	// api.openai.com, the former everywhere else.
	MaxTokensField string
	// HTTPClient to use; default a client of its own over http.DefaultTransport.
	HTTPClient *http.Client
	// Provider overrides ProviderName in replies and errors (e.g. "ollama").
	Provider string
	// Headers are added to every request (e.g. OpenRouter's HTTP-Referer).
	Headers map[string]string
	// Explain, when set, sees every *core.ModelError before Step or Embed
	// returns it (llm fills in the endpoint and the likely cause).
	Explain func(*core.ModelError)
}

// Model is a core.Model over the chat completions endpoint. It is safe for
// concurrent use.
type Model struct {
	chat      sdk.ChatCompletionService
	model     string
	name      string
	timeout   time.Duration
	maxTokens string
	explain   func(*core.ModelError)
}

var _ core.Model = (*Model)(nil)

// New returns a Model for cfg.
func New(cfg Config) (*Model, error) {
	opts, err := options(cfg)
	if err != nil {
		return nil, err
	}
	m := &Model{
		chat:      sdk.NewChatCompletionService(opts...),
		model:     cfg.Model,
		name:      name(cfg),
		timeout:   provider.Or(cfg.Timeout, provider.DefaultTimeout),
		maxTokens: cfg.MaxTokensField,
		explain:   cfg.Explain,
	}
	switch m.maxTokens {
	case MaxTokensField, MaxCompletionTokensField:
	case "":
		m.maxTokens = MaxTokensField
		if u, _ := url.Parse(baseURL(cfg)); u != nil && strings.EqualFold(u.Hostname(), "api.openai.com") {
			m.maxTokens = MaxCompletionTokensField
		}
	default:
		return nil, fmt.Errorf("openai: unknown MaxTokensField %q (want %q or %q)", cfg.MaxTokensField, MaxTokensField, MaxCompletionTokensField)
	}
	return m, nil
}

// Name is the provider label the model puts on replies and errors.
func (m *Model) Name() string { return m.name }

// ModelName is the configured model.
func (m *Model) ModelName() string { return m.model }

// Step sends v to the chat completions endpoint and maps the answer.
func (m *Model) Step(ctx context.Context, v core.View) (core.Reply, error) {
	params, err := m.request(v)
	if err != nil {
		return core.Reply{}, provider.Explain(provider.BadRequest(m.name, err), m.explain)
	}
	callCtx, cancel := context.WithTimeout(ctx, m.timeout)
	defer cancel()
	var raw *http.Response
	res, err := m.chat.New(callCtx, params, option.WithResponseInto(&raw))
	if err != nil {
		return core.Reply{}, provider.Explain(classify(m.name, ctx, callCtx, err, raw), m.explain)
	}
	r, err := m.reply(res)
	return r, provider.Explain(err, m.explain)
}

// Embedder is a core.Embedder over the embeddings endpoint. It is safe for
// concurrent use.
type Embedder struct {
	svc     sdk.EmbeddingService
	model   string
	name    string
	timeout time.Duration
	explain func(*core.ModelError)
}

var _ core.Embedder = (*Embedder)(nil)

// NewEmbedder returns an Embedder for cfg; cfg.Model is the embedding model.
func NewEmbedder(cfg Config) (*Embedder, error) {
	opts, err := options(cfg)
	if err != nil {
		return nil, err
	}
	return &Embedder{
		svc:     sdk.NewEmbeddingService(opts...),
		model:   cfg.Model,
		name:    name(cfg),
		timeout: provider.Or(cfg.Timeout, provider.DefaultTimeout),
		explain: cfg.Explain,
	}, nil
}

// ModelName is the configured embedding model.
func (e *Embedder) ModelName() string { return e.model }

// Embed returns one vector per text, in order, and the embedding model that
// made them (as the server reports it, else as configured).
func (e *Embedder) Embed(ctx context.Context, texts []string) ([][]float32, string, error) {
	vecs, model, err := e.embed(ctx, texts)
	return vecs, model, provider.Explain(err, e.explain)
}

func (e *Embedder) embed(ctx context.Context, texts []string) ([][]float32, string, error) {
	if len(texts) == 0 {
		return nil, e.model, nil
	}
	callCtx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	var raw *http.Response
	res, err := e.svc.New(callCtx, sdk.EmbeddingNewParams{
		Model: e.model,
		Input: sdk.EmbeddingNewParamsInputUnion{OfArrayOfStrings: texts},
	}, option.WithResponseInto(&raw))
	if err != nil {
		return nil, "", classify(e.name, ctx, callCtx, err, raw)
	}
	if res == nil || len(res.Data) != len(texts) {
		got := 0
		if res != nil {
			got = len(res.Data)
		}
		return nil, "", provider.BadResponse(e.name, "embeddings: %d vectors for %d texts", got, len(texts))
	}
	out := make([][]float32, len(texts))
	for i, d := range res.Data {
		idx := int(d.Index)
		if !d.JSON.Index.Valid() {
			idx = i
		}
		if idx < 0 || idx >= len(out) || out[idx] != nil {
			return nil, "", provider.BadResponse(e.name, "embeddings: bad or repeated index %d", d.Index)
		}
		if len(d.Embedding) == 0 {
			return nil, "", provider.BadResponse(e.name, "embeddings: empty vector at index %d", idx)
		}
		vec := make([]float32, len(d.Embedding))
		for j, f := range d.Embedding {
			vec[j] = float32(f)
		}
		out[idx] = vec
	}
	model := res.Model
	if model == "" {
		model = e.model
	}
	return out, model, nil
}

func name(cfg Config) string {
	if cfg.Provider != "" {
		return cfg.Provider
	}
	return ProviderName
}

func baseURL(cfg Config) string {
	if cfg.BaseURL != "" {
		return cfg.BaseURL
	}
	return DefaultBaseURL
}

func options(cfg Config) ([]option.RequestOption, error) {
	base := baseURL(cfg)
	if err := provider.CheckEndpoint(cfg.Model, base); err != nil {
		return nil, fmt.Errorf("openai: %w", err)
	}
	maxDelay := provider.Or(cfg.MaxRetryDelay, provider.DefaultMaxRetryDelay)
	opts := []option.RequestOption{
		option.WithHTTPClient(provider.HTTPClient(cfg.HTTPClient)),
		option.WithBaseURL(base),
		option.WithMaxRetries(provider.Retries(cfg.MaxRetries)),
		option.WithMaxRetryDelay(maxDelay),
	}
	if cfg.APIKey != "" {
		opts = append(opts, option.WithAPIKey(cfg.APIKey))
	}
	for k, v := range cfg.Headers {
		opts = append(opts, option.WithHeader(k, v))
	}
	return opts, nil
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

// StepStream implements core.StreamingModel with a streamed chat
// completion (stream_options.include_usage, so the usage arrives as for
// Step): the chunks are accumulated by the SDK's ChatCompletionAccumulator
// and text sees the content so far after each chunk that grows it. A
// stream that ends before a finish_reason is a lost connection, not an
// answer: a transient failure, as a cut-off Step would be.
func (m *Model) StepStream(ctx context.Context, v core.View, text func(string, bool)) (core.Reply, error) {
	params, err := m.request(v)
	if err != nil {
		return core.Reply{}, provider.Explain(provider.BadRequest(m.name, err), m.explain)
	}
	params.StreamOptions = sdk.ChatCompletionStreamOptionsParam{IncludeUsage: sdk.Bool(true)}
	callCtx, cancel := context.WithTimeout(ctx, m.timeout)
	defer cancel()
	var raw *http.Response
	stream := m.chat.NewStreaming(callCtx, params, option.WithResponseInto(&raw))
	defer stream.Close()
	var acc sdk.ChatCompletionAccumulator
	shown, calls, chunks := "", false, 0
	for stream.Next() {
		chunks++
		if !acc.AddChunk(stream.Current()) {
			return core.Reply{}, provider.Explain(provider.BadResponse(m.name, "a stream chunk that does not fit the ones before"), m.explain)
		}
		if len(acc.Choices) == 0 {
			continue
		}
		msg := acc.Choices[0].Message
		if c := len(msg.ToolCalls) > 0; msg.Content != shown || c != calls {
			shown, calls = msg.Content, c
			text(shown, calls)
		}
	}
	if err := stream.Err(); err != nil {
		return core.Reply{}, provider.Explain(classify(m.name, ctx, callCtx, err, raw), m.explain)
	}
	if chunks == 0 && ctx.Err() == nil {
		// Not a stream at all: a server that ignores "stream" and answers
		// whole (some compatible servers do). Ask it the ordinary way.
		return m.Step(ctx, v)
	}
	if len(acc.Choices) == 0 || acc.Choices[0].FinishReason == "" {
		return core.Reply{}, provider.Explain(&core.ModelError{Provider: m.name, Failure: core.FailUnavailable,
			Err: errors.New("the stream ended before the answer did")}, m.explain)
	}
	r, err := m.reply(&acc.ChatCompletion)
	return r, provider.Explain(err, m.explain)
}
