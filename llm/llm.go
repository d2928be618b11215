// Package llm builds the bot's model providers from configuration.
//
// The providers live in subpackages: openai (any OpenAI-compatible endpoint,
// chat and embeddings), anthropic, failover (primary → secondary with a
// circuit breaker), scripted (tests and the offline demo); llmtest has fake
// servers speaking both wire formats.
//
// Configuration (FromEnv):
//
//	MARLOWE_MODEL_PROVIDER            openai | anthropic; empty: no model
//	MARLOWE_MODEL                     model name (required with a provider)
//	MARLOWE_MODEL_BASE_URL            default https://api.openai.com/v1 or https://api.anthropic.com
//	OPENAI_API_KEY, ANTHROPIC_API_KEY optional (local servers need none)
//	MARLOWE_MODEL_TIMEOUT             per call, Go duration or seconds; default 60s
//	MARLOWE_MODEL_MAX_RETRIES         SDK retries per call; default 1, 0 for none
//	MARLOWE_MODEL_PROVIDER_FALLBACK   the secondary, configured like the primary:
//	MARLOWE_MODEL_FALLBACK            MARLOWE_MODEL_FALLBACK, MARLOWE_MODEL_BASE_URL_FALLBACK,
//	MARLOWE_MODEL_BASE_URL_FALLBACK   and optionally OPENAI_API_KEY_FALLBACK / ANTHROPIC_API_KEY_FALLBACK
//	MARLOWE_EMBEDDING_MODEL           optional; embeddings over an OpenAI-compatible endpoint
//	MARLOWE_EMBEDDING_BASE_URL        default MARLOWE_MODEL_BASE_URL when the provider is openai,
//	                                  else https://api.openai.com/v1 (key: OPENAI_API_KEY)
package llm

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/llm/anthropic"
	"github.com/marlowe-bot/marlowe/llm/failover"
	"github.com/marlowe-bot/marlowe/llm/internal/provider"
	"github.com/marlowe-bot/marlowe/llm/openai"
)

// Provider names accepted in MARLOWE_MODEL_PROVIDER(_FALLBACK).
const (
	ProviderOpenAI    = "openai"
	ProviderAnthropic = "anthropic"
)

// Environment variable names.
const (
	EnvProvider         = "MARLOWE_MODEL_PROVIDER"
	EnvModel            = "MARLOWE_MODEL"
	EnvBaseURL          = "MARLOWE_MODEL_BASE_URL"
	EnvTimeout          = "MARLOWE_MODEL_TIMEOUT"
	EnvMaxRetries       = "MARLOWE_MODEL_MAX_RETRIES"
	EnvEmbeddingModel   = "MARLOWE_EMBEDDING_MODEL"
	EnvEmbeddingBaseURL = "MARLOWE_EMBEDDING_BASE_URL"
	EnvOpenAIKey        = "OPENAI_API_KEY"
	EnvAnthropicKey     = "ANTHROPIC_API_KEY"
	FallbackSuffix      = "_FALLBACK"
)

// Endpoint describes one configured model, without secrets.
type Endpoint struct {
	Provider string // openai | anthropic
	Model    string
	Host     string // host[:port] of the base URL
	HasKey   bool   // an API key is configured (never the key itself)
}

func (e Endpoint) String() string {
	return fmt.Sprintf("%s %s at %s", e.Provider, e.Model, e.Host)
}

// Info says what FromEnv configured, for the start-up log. It holds no secrets.
type Info struct {
	// Configured is false when no model provider is set: the bot runs without
	// a model (Model is nil).
	Configured bool
	Primary    Endpoint
	Fallback   *Endpoint // nil without a fallback
	Embedding  *Endpoint // nil without embeddings
	Timeout    time.Duration
	// Description is one human-readable line.
	Description string
}

func (i Info) String() string { return i.Description }

// LogValue lets Info be logged as a group.
func (i Info) LogValue() slog.Value {
	attrs := []slog.Attr{slog.Bool("configured", i.Configured)}
	if i.Configured {
		attrs = append(attrs, slog.String("model", i.Primary.String()), slog.Duration("timeout", i.Timeout))
	}
	if i.Fallback != nil {
		attrs = append(attrs, slog.String("fallback", i.Fallback.String()))
	}
	if i.Embedding != nil {
		attrs = append(attrs, slog.String("embedding", i.Embedding.String()))
	}
	return slog.GroupValue(attrs...)
}

// Option adjusts what FromEnv builds.
type Option func(*options)

type options struct {
	log        *slog.Logger
	httpClient *http.Client
	onFailover func(string)
}

// WithFailoverHook sets a function told each time a call goes to the
// fallback model (with the reason: the primary's failure, or
// breaker-open).
func WithFailoverHook(f func(reason string)) Option { return func(o *options) { o.onFailover = f } }

// WithHTTPClient sets the HTTP client of every model and embedding call
// (cmd/bot passes one whose transport carries W3C trace context).
func WithHTTPClient(c *http.Client) Option { return func(o *options) { o.httpClient = c } }

// WithLogger sets the logger of the failover model.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// FromEnv builds the model and the embedder from configuration read through
// getenv (pass os.Getenv). With MARLOWE_MODEL_PROVIDER empty the model is nil
// and Info says so; without MARLOWE_EMBEDDING_MODEL the embedder is nil.
// With a fallback provider the model is a failover.Model over both.
func FromEnv(getenv func(string) string, opts ...Option) (core.Model, core.Embedder, Info, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	get := func(k string) string { return strings.TrimSpace(getenv(k)) }

	timeout, err := parseTimeout(get(EnvTimeout))
	if err != nil {
		return nil, nil, Info{}, err
	}
	retries, err := parseRetries(get(EnvMaxRetries))
	if err != nil {
		return nil, nil, Info{}, err
	}
	info := Info{Timeout: timeout}

	primary, primaryEP, err := buildModel(get, "", timeout, retries, nil, o.httpClient)
	if err != nil {
		return nil, nil, Info{}, err
	}
	secondary, fallbackEP, err := buildModel(get, FallbackSuffix, timeout, retries, nil, o.httpClient)
	if err != nil {
		return nil, nil, Info{}, err
	}
	if primary == nil && secondary != nil {
		return nil, nil, Info{}, fmt.Errorf("llm: %s is set but %s is empty: a fallback needs a primary model",
			EnvProvider+FallbackSuffix, EnvProvider)
	}

	var model core.Model
	if primary != nil {
		info.Configured = true
		info.Primary = *primaryEP
		model = primary
		if secondary != nil {
			info.Fallback = fallbackEP
			log := o.log
			if log == nil {
				log = slog.Default()
			}
			model = failover.New(primary, secondary,
				failover.WithLogger(log),
				failover.WithNames(primaryEP.String(), fallbackEP.String()),
				failover.WithOnFailover(o.onFailover))
		}
	}

	embedder, embedEP, err := buildEmbedder(get, primaryEP, timeout, retries, nil, o.httpClient)
	if err != nil {
		return nil, nil, Info{}, err
	}
	info.Embedding = embedEP
	info.Description = describe(info)
	return model, embedder, info, nil
}

// buildModel builds the model named by the variables with the given suffix;
// (nil, nil, nil) when its provider is empty.
func buildModel(get func(string) string, suffix string, timeout time.Duration, retries int, hdr map[string]string, hc *http.Client) (core.Model, *Endpoint, error) {
	providerVar, modelVar, baseVar := EnvProvider+suffix, EnvModel+suffix, EnvBaseURL+suffix
	prov := strings.ToLower(get(providerVar))
	name := get(modelVar)
	base := get(baseVar)
	if prov == "" {
		if name != "" || base != "" {
			return nil, nil, fmt.Errorf("llm: %s or %s is set but %s is empty (set it to %q or %q)",
				modelVar, baseVar, providerVar, ProviderOpenAI, ProviderAnthropic)
		}
		return nil, nil, nil
	}
	// An unknown provider is the first thing to say: asking for a model
	// name first sends people down the wrong path (ollama is "openai" here).
	if prov != ProviderOpenAI && prov != ProviderAnthropic {
		return nil, nil, fmt.Errorf("llm: %s=%q is not a known provider: want %q for any OpenAI-compatible endpoint (Ollama, vLLM, llama.cpp, OpenRouter: set %s to its /v1 URL), or %q",
			providerVar, prov, ProviderOpenAI, baseVar, ProviderAnthropic)
	}
	if name == "" {
		return nil, nil, fmt.Errorf("llm: %s is required when %s=%s", modelVar, providerVar, prov)
	}
	ev := endpointVars{provider: prov, model: name, timeout: timeout, providerVar: providerVar, modelVar: modelVar, baseVar: baseVar}
	switch prov {
	case ProviderOpenAI:
		if base == "" {
			base = openai.DefaultBaseURL
		}
		ev.base, ev.path = base, "/chat/completions"
		ev.keyVar = keyVarFor(get, EnvOpenAIKey, suffix)
		key := keyFor(get, EnvOpenAIKey, suffix)
		m, err := openai.New(openai.Config{
			BaseURL: base, APIKey: key, Model: name,
			Timeout: timeout, MaxRetries: retries, Explain: ev.explainer(), Headers: hdr, HTTPClient: hc,
		})
		if err != nil {
			return nil, nil, fmt.Errorf("llm: %s: %w", providerVar, err)
		}
		return m, &Endpoint{Provider: prov, Model: name, Host: host(base), HasKey: key != ""}, nil
	default: // ProviderAnthropic
		if base == "" {
			base = anthropic.DefaultBaseURL
		}
		ev.base, ev.path = base, "/v1/messages"
		ev.keyVar = keyVarFor(get, EnvAnthropicKey, suffix)
		key := keyFor(get, EnvAnthropicKey, suffix)
		m, err := anthropic.New(anthropic.Config{
			BaseURL: base, APIKey: key, Model: name,
			Timeout: timeout, MaxRetries: retries, Explain: ev.explainer(), Headers: hdr, HTTPClient: hc,
		})
		if err != nil {
			return nil, nil, fmt.Errorf("llm: %s: %w", providerVar, err)
		}
		return m, &Endpoint{Provider: prov, Model: name, Host: host(base), HasKey: key != ""}, nil
	}
}

// keyFor reads KEY_FALLBACK for the fallback, falling back to KEY.
func keyFor(get func(string) string, key, suffix string) string {
	if suffix != "" {
		if v := get(key + suffix); v != "" {
			return v
		}
	}
	return get(key)
}

// keyVarFor names the variable keyFor read (for error hints).
func keyVarFor(get func(string) string, key, suffix string) string {
	if suffix != "" && get(key+suffix) != "" {
		return key + suffix
	}
	return key
}

func buildEmbedder(get func(string) string, primary *Endpoint, timeout time.Duration, retries int, hdr map[string]string, hc *http.Client) (core.Embedder, *Endpoint, error) {
	name := get(EnvEmbeddingModel)
	base := get(EnvEmbeddingBaseURL)
	if name == "" {
		if base != "" {
			return nil, nil, fmt.Errorf("llm: %s is set but %s is empty", EnvEmbeddingBaseURL, EnvEmbeddingModel)
		}
		return nil, nil, nil
	}
	baseVar := EnvEmbeddingBaseURL
	if base == "" {
		base = openai.DefaultBaseURL
		if primary != nil && primary.Provider == ProviderOpenAI {
			if b := get(EnvBaseURL); b != "" {
				base, baseVar = b, EnvBaseURL
			}
		}
	}
	ev := endpointVars{provider: ProviderOpenAI, model: name, base: base, timeout: timeout, path: "/embeddings",
		modelVar: EnvEmbeddingModel, baseVar: baseVar, keyVar: EnvOpenAIKey}
	key := get(EnvOpenAIKey)
	e, err := openai.NewEmbedder(openai.Config{
		BaseURL: base, APIKey: key, Model: name,
		Timeout: timeout, MaxRetries: retries, Explain: ev.explainer(), Headers: hdr, HTTPClient: hc,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("llm: %s: %w", EnvEmbeddingModel, err)
	}
	return e, &Endpoint{Provider: ProviderOpenAI, Model: name, Host: host(base), HasKey: key != ""}, nil
}

func parseTimeout(s string) (time.Duration, error) {
	if s == "" {
		return provider.DefaultTimeout, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		secs, err2 := strconv.ParseFloat(s, 64)
		if err2 != nil {
			return 0, fmt.Errorf("llm: %s=%q is not a duration (e.g. 60s, 2m) or a number of seconds", EnvTimeout, s)
		}
		d = time.Duration(secs * float64(time.Second))
	}
	if d <= 0 {
		return 0, fmt.Errorf("llm: %s=%q must be positive", EnvTimeout, s)
	}
	return d, nil
}

// parseRetries maps the variable onto a provider Config.MaxRetries value.
func parseRetries(s string) (int, error) {
	if s == "" {
		return 0, nil // the provider default
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n > 10 {
		return 0, fmt.Errorf("llm: %s=%q must be a whole number from 0 to 10", EnvMaxRetries, s)
	}
	if n == 0 {
		return provider.NoRetries, nil
	}
	return n, nil
}

// host keeps only host[:port] of a base URL: no credentials, path or query.
func host(base string) string {
	u, err := url.Parse(base)
	if err != nil || u.Host == "" {
		return "(invalid URL)"
	}
	return u.Host
}

func describe(i Info) string {
	var b strings.Builder
	if !i.Configured {
		b.WriteString("no model configured (" + EnvProvider + " is empty)")
	} else {
		fmt.Fprintf(&b, "model %s", i.Primary)
		if !i.Primary.HasKey {
			b.WriteString(" (no API key)")
		}
		fmt.Fprintf(&b, ", timeout %s", i.Timeout)
		if i.Fallback != nil {
			fmt.Fprintf(&b, "; fallback %s", *i.Fallback)
			if !i.Fallback.HasKey {
				b.WriteString(" (no API key)")
			}
		} else {
			b.WriteString("; no fallback")
		}
	}
	if i.Embedding != nil {
		fmt.Fprintf(&b, "; embeddings %s", *i.Embedding)
	} else {
		b.WriteString("; no embeddings (" + EnvEmbeddingModel + " is empty)")
	}
	return b.String()
}
