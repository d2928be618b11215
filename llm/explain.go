package llm

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/marlowe-bot/marlowe/core"
)

// endpointVars names the settings behind one configured endpoint, so an
// error can say which one to change.
type endpointVars struct {
	provider string // openai | anthropic
	model    string // the configured model name
	base     string // the base URL as configured (may hold credentials: never printed whole)
	timeout  time.Duration

	providerVar, modelVar, baseVar, keyVar string
	path                                   string // the API path the provider calls: "/chat/completions", "/embeddings", "/v1/messages"
}

// explainer returns the Config.Explain function for an endpoint: it puts
// the base URL's host and the likely cause on every model error.
func (ev endpointVars) explainer() func(*core.ModelError) {
	h := host(ev.base)
	return func(me *core.ModelError) {
		if me.Host == "" {
			me.Host = h
		}
		if me.Hint == "" {
			me.Hint = ev.hint(me)
		}
	}
}

// hint is the likely cause of a failure, in words, naming the setting.
func (ev endpointVars) hint(me *core.ModelError) string {
	switch {
	case me.Status == http.StatusNotFound:
		if ev.provider == ProviderOpenAI && !versionedPath(ev.base) {
			return fmt.Sprintf("%s has no %s: %s probably lacks the /v1 path (e.g. %s)",
				safeURL(ev.base), ev.path, ev.baseVar, withV1(ev.base))
		}
		return fmt.Sprintf("the server at %s does not know model %q, or the base URL is wrong: check %s and %s (for Ollama, `ollama pull %s`)",
			host(ev.base), ev.model, ev.modelVar, ev.baseVar, ev.model)
	case me.Status == http.StatusUnauthorized || me.Status == http.StatusForbidden:
		return fmt.Sprintf("the server refused the API key: check %s", ev.keyVar)
	case me.Status == http.StatusPaymentRequired:
		return "the provider account is out of credit or has no billing set up"
	case me.Failure == core.FailBadRequest && me.Status >= 400:
		return fmt.Sprintf("the server refused the request: check that %s=%q exists there (and supports tool calls)", ev.modelVar, ev.model)
	case me.Failure == core.FailRateLimited:
		return "the provider is rate limiting this key; the run waits and retries"
	case me.Failure == core.FailTimeout:
		return fmt.Sprintf("no answer within %s (MARLOWE_MODEL_TIMEOUT): the server is slow, still loading the model, or unreachable", ev.timeout)
	case me.Failure == core.FailUnavailable && me.Status == 0:
		s := fmt.Sprintf("nothing answered at %s: is the model server running, and is %s right?", host(ev.base), ev.baseVar)
		if loopback(ev.base) {
			s += " Inside a container 127.0.0.1 is the container itself: use http://host.docker.internal:PORT (docs/troubleshooting.md)"
		}
		return s
	case me.Failure == core.FailUnavailable:
		return fmt.Sprintf("the server failed (HTTP %d): see its logs; a fallback model (%s) rides out outages", me.Status, EnvProvider+FallbackSuffix)
	case me.Failure == core.FailBadResponse && ev.providerVar == "": // embeddings
		return fmt.Sprintf("the server answered, but not as an OpenAI-compatible embeddings API: check %s and %s", ev.baseVar, ev.modelVar)
	case me.Failure == core.FailBadResponse:
		return fmt.Sprintf("the server answered, but not as an %s-compatible API: is %s=%s right for %s?", ev.provider, ev.providerVar, ev.provider, host(ev.base))
	}
	return ""
}

// versionedPath reports whether a base URL's path ends in a version
// segment (/v1, /v1beta, /api/v2 ...), as OpenAI-compatible servers expect.
func versionedPath(base string) bool {
	u, err := url.Parse(base)
	if err != nil {
		return true // nothing useful to suggest
	}
	p := strings.TrimRight(u.Path, "/")
	last := p[strings.LastIndex(p, "/")+1:]
	return len(last) >= 2 && last[0] == 'v' && last[1] >= '0' && last[1] <= '9'
}

// safeURL is scheme://host/path of a base URL: no credentials, no query.
func safeURL(base string) string {
	u, err := url.Parse(base)
	if err != nil || u.Host == "" {
		return "(invalid URL)"
	}
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}).String()
}

func withV1(base string) string {
	return strings.TrimRight(safeURL(base), "/") + "/v1"
}

func loopback(base string) bool {
	u, err := url.Parse(base)
	if err != nil {
		return false
	}
	h := u.Hostname()
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}
