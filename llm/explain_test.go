package llm_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/llm"
	"github.com/marlowe-bot/marlowe/llm/llmtest"
)

// ollamaLike serves the OpenAI fake only under /v1, as Ollama does: a base
// URL without /v1 gets a 404 for /chat/completions.
func ollamaLike(t *testing.T) (*llmtest.OpenAI, string) {
	t.Helper()
	f := llmtest.NewOpenAI()
	mux := http.NewServeMux()
	mux.Handle("/v1/", f)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "404 page not found", http.StatusNotFound) })
	srv := httptest.NewServer(mux)
	t.Cleanup(func() { f.Release(); srv.Close() })
	return f, srv.URL
}

// TestModelErrorsNameEndpointAndCause: every failure a newcomer meets on the
// first message says which endpoint failed (host, never credentials) and
// the likely cause, naming the setting to change.
func TestModelErrorsNameEndpointAndCause(t *testing.T) {
	_, ollama := ollamaLike(t)
	fake := llmtest.NewOpenAIServer(t)
	ant := llmtest.NewAnthropicServer(t)
	refused, err := llmtest.RefusedURL()
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		env     map[string]string
		enqueue func()
		failure core.ModelFailure
		want    []string // in Error(), which the log prints
		notWant []string
	}{
		{
			name:    "base URL without /v1",
			env:     map[string]string{"MARLOWE_MODEL_PROVIDER": "openai", "MARLOWE_MODEL": "llama3.2", "MARLOWE_MODEL_BASE_URL": "http://u:secretpw@" + strings.TrimPrefix(ollama, "http://")},
			failure: core.FailBadRequest,
			want:    []string{"at " + strings.TrimPrefix(ollama, "http://"), "lacks the /v1 path", "MARLOWE_MODEL_BASE_URL", ollama + "/v1"},
			notWant: []string{"secretpw"},
		},
		{
			name:    "unknown model",
			env:     map[string]string{"MARLOWE_MODEL_PROVIDER": "openai", "MARLOWE_MODEL": "llama9", "MARLOWE_MODEL_BASE_URL": fake.URL},
			enqueue: func() { fake.Enqueue(llmtest.Error(404, `model "llama9" not found, try pulling it first`)) },
			failure: core.FailBadRequest,
			want:    []string{"does not know model \"llama9\"", "MARLOWE_MODEL and MARLOWE_MODEL_BASE_URL", "ollama pull llama9", "try pulling it first"},
			notWant: []string{"lacks the /v1"},
		},
		{
			name:    "wrong key",
			env:     map[string]string{"MARLOWE_MODEL_PROVIDER": "openai", "MARLOWE_MODEL": "gpt", "MARLOWE_MODEL_BASE_URL": fake.URL, "OPENAI_API_KEY": "sk-wrong"},
			enqueue: func() { fake.Enqueue(llmtest.Error(401, "invalid api key")) },
			failure: core.FailAuth,
			want:    []string{"refused the API key: check OPENAI_API_KEY"},
			notWant: []string{"sk-wrong"},
		},
		{
			name:    "nothing listening on loopback",
			env:     map[string]string{"MARLOWE_MODEL_PROVIDER": "openai", "MARLOWE_MODEL": "gpt", "MARLOWE_MODEL_BASE_URL": refused + "/v1", "MARLOWE_MODEL_MAX_RETRIES": "0"},
			failure: core.FailUnavailable,
			want:    []string{"nothing answered at " + strings.TrimPrefix(refused, "http://"), "host.docker.internal"},
		},
		{
			name:    "anthropic unknown model: no /v1 advice",
			env:     map[string]string{"MARLOWE_MODEL_PROVIDER": "anthropic", "MARLOWE_MODEL": "claude-nope", "MARLOWE_MODEL_BASE_URL": ant.URL},
			enqueue: func() { ant.Enqueue(llmtest.Error(404, "model: claude-nope")) },
			failure: core.FailBadRequest,
			want:    []string{"model anthropic at ", "does not know model \"claude-nope\""},
			notWant: []string{"lacks the /v1"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.enqueue != nil {
				tc.enqueue()
			}
			m, _, _, err := llm.FromEnv(env(tc.env))
			if err != nil {
				t.Fatal(err)
			}
			_, err = m.Step(context.Background(), core.View{Messages: []core.Message{{Role: core.RoleUser, Text: "hi"}}})
			me, ok := core.AsModelError(err)
			if !ok {
				t.Fatalf("err = %v, want a *core.ModelError", err)
			}
			if me.Failure != tc.failure {
				t.Errorf("failure = %s, want %s", me.Failure, tc.failure)
			}
			u, _ := url.Parse(tc.env["MARLOWE_MODEL_BASE_URL"])
			if me.Host != u.Host {
				t.Errorf("host = %q, want %q", me.Host, u.Host)
			}
			msg := err.Error()
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error lacks %q:\n%s", w, msg)
				}
			}
			for _, w := range tc.notWant {
				if strings.Contains(msg, w) {
					t.Errorf("error has %q:\n%s", w, msg)
				}
			}
		})
	}
}

// TestUnknownProviderSaidFirst: MARLOWE_MODEL_PROVIDER=ollama without a
// model name is reported as an unknown provider, not as a missing name.
func TestUnknownProviderSaidFirst(t *testing.T) {
	for _, suffix := range []string{"", "_FALLBACK"} {
		e := map[string]string{"MARLOWE_MODEL_PROVIDER": "openai", "MARLOWE_MODEL": "m", "MARLOWE_MODEL_PROVIDER" + suffix: "ollama"}
		if suffix == "" {
			delete(e, "MARLOWE_MODEL")
		}
		_, _, _, err := llm.FromEnv(env(e))
		if err == nil {
			t.Fatalf("%s: no error", suffix)
		}
		msg := err.Error()
		if !strings.Contains(msg, `MARLOWE_MODEL_PROVIDER`+suffix+`="ollama" is not a known provider`) || strings.Contains(msg, "is required") {
			t.Errorf("%s: error = %s", suffix, msg)
		}
		if !strings.Contains(msg, `"openai" for any OpenAI-compatible endpoint (Ollama`) {
			t.Errorf("%s: error does not say what to use instead: %s", suffix, msg)
		}
	}
}

// TestProbeEnv: the probe calls each endpoint for real — the primary, the
// fallback on its own (failover does not hide it) and embeddings — and
// reports what came back.
func TestProbeEnv(t *testing.T) {
	good := llmtest.NewOpenAIServer(t)
	_, ollama := ollamaLike(t)
	res, err := llm.ProbeEnv(context.Background(), env(map[string]string{
		"MARLOWE_MODEL_PROVIDER": "openai", "MARLOWE_MODEL": "qwen", "MARLOWE_MODEL_BASE_URL": good.URL,
		"MARLOWE_MODEL_PROVIDER_FALLBACK": "openai", "MARLOWE_MODEL_FALLBACK": "llama", "MARLOWE_MODEL_BASE_URL_FALLBACK": ollama,
		"MARLOWE_EMBEDDING_MODEL": "nomic",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 3 {
		t.Fatalf("results = %+v", res)
	}
	if r := res[0]; r.Role != "model" || !r.OK() || !strings.Contains(r.Answer, "answered") || r.URL != good.URL {
		t.Errorf("primary = %+v", r)
	}
	if r := res[1]; r.Role != "fallback" || r.OK() || !strings.Contains(r.Err.Error(), "lacks the /v1 path") {
		t.Errorf("fallback = %+v", r)
	}
	if r := res[2]; r.Role != "embeddings" || !r.OK() || !strings.Contains(r.Answer, "-dimensional vector") {
		t.Errorf("embeddings = %+v", r)
	}
	// The probes are marked, so the fake keeps them out of a scripted conversation.
	if probes := good.Probes(); len(probes) != 3 || probes[0].Header.Get(llm.ProbeHeader) != "1" || len(good.Requests()) != 0 {
		t.Errorf("probes to the primary's server = %d (want one chat, one with an image, one embedding), other requests %d", len(probes), len(good.Requests()))
	}

	ant := llmtest.NewAnthropicServer(t)
	ant.Enqueue(llmtest.Error(500, "scripted for the conversation"))
	res, err = llm.ProbeEnv(context.Background(), env(map[string]string{"MARLOWE_MODEL_PROVIDER": "anthropic", "MARLOWE_MODEL": "claude-x", "MARLOWE_MODEL_BASE_URL": ant.URL}))
	if err != nil || len(res) != 1 || !res[0].OK() || len(ant.Probes()) != 2 || ant.Pending() != 1 {
		t.Errorf("anthropic probe: %+v, %v; probes %d, still queued %d", res, err, len(ant.Probes()), ant.Pending())
	}

	none, err := llm.ProbeEnv(context.Background(), env(nil))
	if err != nil || len(none) != 0 {
		t.Errorf("no model: %+v, %v", none, err)
	}
}
