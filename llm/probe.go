package llm

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/png"
	"strings"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/llm/anthropic"
	"github.com/marlowe-bot/marlowe/llm/internal/provider"
	"github.com/marlowe-bot/marlowe/llm/openai"
)

// ProbeHeader is sent with every probe call (value "1"): a server, a proxy's
// log or a test fake can tell probes from conversation calls.
const ProbeHeader = provider.ProbeHeader

func probeHeaders() map[string]string { return map[string]string{ProbeHeader: "1"} }

// ProbeResult is what one configured endpoint answered to a minimal call.
type ProbeResult struct {
	Role     string // "model", "fallback" or "embeddings"
	Endpoint Endpoint
	URL      string // the base URL without credentials or query
	Elapsed  time.Duration
	// Answer says what came back on success: the reply's first words, or
	// the vector size.
	Answer string
	Err    error
	// Images says whether a chat model took an image ("yes", "no: …",
	// "unknown: …"); "" for embeddings or a failed chat probe.
	Images string
}

// TakesImages reports whether the probe saw the model take an image.
func (r ProbeResult) TakesImages() bool { return r.Images == "yes" }

// OK reports whether the endpoint answered usefully.
func (r ProbeResult) OK() bool { return r.Err == nil }

// probeView is the smallest useful chat call: a few tokens, no tools.
var probeView = core.View{
	System:    "You are a health check. Answer with one word.",
	Messages:  []core.Message{{Role: core.RoleUser, Text: "Reply with the word OK."}},
	MaxTokens: 16,
}

// ProbeEnv builds each configured endpoint on its own — the fallback is not
// hidden behind failover — and makes one minimal real call to each: a
// chat step of a few tokens, and one embedding. Configuration errors are
// returned as FromEnv returns them; no configured model means no results.
func ProbeEnv(ctx context.Context, getenv func(string) string) ([]ProbeResult, error) {
	get := func(k string) string { return strings.TrimSpace(getenv(k)) }
	timeout, err := parseTimeout(get(EnvTimeout))
	if err != nil {
		return nil, err
	}
	if _, err := parseRetries(get(EnvMaxRetries)); err != nil {
		return nil, err
	}
	// One SDK attempt: a probe reports what the endpoint does now.
	retries := provider.NoRetries
	var out []ProbeResult
	var primaryEP *Endpoint
	for _, suffix := range []string{"", FallbackSuffix} {
		m, ep, err := buildModel(get, suffix, timeout, retries, probeHeaders(), nil)
		if err != nil {
			return out, err
		}
		if m == nil {
			continue
		}
		role := "model"
		if suffix != "" {
			role = "fallback"
		} else {
			primaryEP = ep
		}
		base := get(EnvBaseURL + suffix)
		if base == "" {
			base = defaultBase(ep.Provider)
		}
		start := time.Now()
		reply, err := m.Step(ctx, probeView)
		r := ProbeResult{Role: role, Endpoint: *ep, URL: safeURL(base), Elapsed: time.Since(start), Err: err}
		if err == nil {
			r.Answer = fmt.Sprintf("answered %q (model %s)", shorten(reply.Text, 40), reply.Model)
			r.Images = probeImages(ctx, m)
		}
		out = append(out, r)
	}
	e, ep, err := buildEmbedder(get, primaryEP, timeout, retries, probeHeaders(), nil)
	if err != nil {
		return out, err
	}
	if e != nil {
		base := get(EnvEmbeddingBaseURL)
		if base == "" {
			base = defaultBase(ProviderOpenAI)
			if primaryEP != nil && primaryEP.Provider == ProviderOpenAI && get(EnvBaseURL) != "" {
				base = get(EnvBaseURL)
			}
		}
		start := time.Now()
		vecs, model, err := e.Embed(ctx, []string{"marlowe doctor"})
		r := ProbeResult{Role: "embeddings", Endpoint: *ep, URL: safeURL(base), Elapsed: time.Since(start), Err: err}
		if err == nil {
			if len(vecs) != 1 || len(vecs[0]) == 0 {
				r.Err = fmt.Errorf("embeddings: got %d vectors for 1 text", len(vecs))
			} else {
				r.Answer = fmt.Sprintf("a %d-dimensional vector (model %s)", len(vecs[0]), model)
			}
		}
		out = append(out, r)
	}
	return out, nil
}

// probeImages sends one tiny picture: a model that answers takes images;
// one whose server refuses the request (400) does not.
func probeImages(ctx context.Context, m core.Model) string {
	img := image.NewGray(image.Rect(0, 0, 8, 8))
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		return "unknown: " + err.Error()
	}
	v := probeView
	v.Messages = []core.Message{{Role: core.RoleUser, Text: "Reply with the word OK.", Images: []core.ImagePart{{Type: "image/png", Data: b.Bytes()}}}}
	_, err := m.Step(ctx, v)
	if err == nil {
		return "yes"
	}
	if me, ok := core.AsModelError(err); ok && me.Failure == core.FailBadRequest {
		return "no: the model refused an image (" + shorten(me.Err.Error(), 80) + ")"
	}
	return "unknown: " + shorten(err.Error(), 80)
}

func defaultBase(prov string) string {
	if prov == ProviderAnthropic {
		return anthropic.DefaultBaseURL
	}
	return openai.DefaultBaseURL
}

func shorten(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len([]rune(s)) <= n {
		return s
	}
	return string([]rune(s)[:n]) + "…"
}
