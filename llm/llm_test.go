package llm_test

import (
	"context"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/llm"
	"github.com/marlowe-bot/marlowe/llm/anthropic"
	"github.com/marlowe-bot/marlowe/llm/failover"
	"github.com/marlowe-bot/marlowe/llm/llmtest"
	"github.com/marlowe-bot/marlowe/llm/openai"
)

func env(kv map[string]string) func(string) string {
	return func(k string) string { return kv[k] }
}

func TestFromEnvConfigurations(t *testing.T) {
	cases := []struct {
		name      string
		env       map[string]string
		model     any // type of the model, nil for none
		embedder  bool
		info      func(t *testing.T, i llm.Info)
		wantInDes []string
	}{
		{
			name: "nothing configured",
			env:  map[string]string{},
			info: func(t *testing.T, i llm.Info) {
				if i.Configured || i.Fallback != nil || i.Embedding != nil {
					t.Errorf("info = %+v", i)
				}
			},
			wantInDes: []string{"no model configured", "MARLOWE_MODEL_PROVIDER"},
		},
		{
			name:  "openai defaults",
			env:   map[string]string{"MARLOWE_MODEL_PROVIDER": "openai", "MARLOWE_MODEL": "gpt-test", "OPENAI_API_KEY": "sk-secret-123"},
			model: (*openai.Model)(nil),
			info: func(t *testing.T, i llm.Info) {
				want := llm.Endpoint{Provider: "openai", Model: "gpt-test", Host: "api.openai.com", HasKey: true}
				if !i.Configured || i.Primary != want || i.Timeout != 60*time.Second {
					t.Errorf("info = %+v", i)
				}
			},
			wantInDes: []string{"openai gpt-test at api.openai.com", "timeout 1m0s", "no fallback", "no embeddings"},
		},
		{
			name: "ollama, case and spaces forgiven, timeout in seconds",
			env: map[string]string{"MARLOWE_MODEL_PROVIDER": " OpenAI ", "MARLOWE_MODEL": "llama3.2",
				"MARLOWE_MODEL_BASE_URL": "http://localhost:11434/v1", "MARLOWE_MODEL_TIMEOUT": "90"},
			model: (*openai.Model)(nil),
			info: func(t *testing.T, i llm.Info) {
				if i.Primary.Host != "localhost:11434" || i.Primary.HasKey || i.Timeout != 90*time.Second {
					t.Errorf("info = %+v", i)
				}
			},
			wantInDes: []string{"llama3.2 at localhost:11434", "(no API key)", "timeout 1m30s"},
		},
		{
			name:  "anthropic",
			env:   map[string]string{"MARLOWE_MODEL_PROVIDER": "anthropic", "MARLOWE_MODEL": "claude-x", "ANTHROPIC_API_KEY": "sk-ant-secret", "MARLOWE_MODEL_TIMEOUT": "2m"},
			model: (*anthropic.Model)(nil),
			info: func(t *testing.T, i llm.Info) {
				if i.Primary.Host != "api.anthropic.com" || !i.Primary.HasKey || i.Timeout != 2*time.Minute {
					t.Errorf("info = %+v", i)
				}
			},
			wantInDes: []string{"anthropic claude-x at api.anthropic.com"},
		},
		{
			name: "fallback and embeddings on the model's endpoint",
			env: map[string]string{
				"MARLOWE_MODEL_PROVIDER": "openai", "MARLOWE_MODEL": "qwen", "MARLOWE_MODEL_BASE_URL": "http://user:pw@gpu-box:8000/v1?token=abc",
				"MARLOWE_MODEL_PROVIDER_FALLBACK": "anthropic", "MARLOWE_MODEL_FALLBACK": "claude-y",
				"MARLOWE_EMBEDDING_MODEL": "nomic-embed",
			},
			model:    (*failover.Model)(nil),
			embedder: true,
			info: func(t *testing.T, i llm.Info) {
				if i.Fallback == nil || *i.Fallback != (llm.Endpoint{Provider: "anthropic", Model: "claude-y", Host: "api.anthropic.com"}) {
					t.Errorf("fallback = %+v", i.Fallback)
				}
				if i.Embedding == nil || *i.Embedding != (llm.Endpoint{Provider: "openai", Model: "nomic-embed", Host: "gpu-box:8000"}) {
					t.Errorf("embedding = %+v", i.Embedding)
				}
			},
			wantInDes: []string{"qwen at gpu-box:8000", "fallback anthropic claude-y at api.anthropic.com", "embeddings openai nomic-embed at gpu-box:8000"},
		},
		{
			name: "embeddings elsewhere, no chat model",
			env: map[string]string{
				"MARLOWE_EMBEDDING_MODEL": "text-embedding-3-small", "MARLOWE_EMBEDDING_BASE_URL": "http://embedder:9000/v1",
			},
			embedder: true,
			info: func(t *testing.T, i llm.Info) {
				if i.Configured || i.Embedding == nil || i.Embedding.Host != "embedder:9000" {
					t.Errorf("info = %+v", i)
				}
			},
			wantInDes: []string{"no model configured", "embeddings openai text-embedding-3-small at embedder:9000"},
		},
		{
			name: "anthropic chat, embeddings default to OpenAI",
			env: map[string]string{"MARLOWE_MODEL_PROVIDER": "anthropic", "MARLOWE_MODEL": "claude-x",
				"MARLOWE_MODEL_BASE_URL": "http://proxy:1", "MARLOWE_EMBEDDING_MODEL": "text-embedding-3-small"},
			model:    (*anthropic.Model)(nil),
			embedder: true,
			info: func(t *testing.T, i llm.Info) {
				if i.Embedding == nil || i.Embedding.Host != "api.openai.com" {
					t.Errorf("embedding = %+v", i.Embedding)
				}
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, e, info, err := llm.FromEnv(env(tc.env))
			if err != nil {
				t.Fatalf("FromEnv: %v", err)
			}
			if tc.model == nil {
				if m != nil {
					t.Errorf("model = %T, want nil", m)
				}
			} else if reflect.TypeOf(m) != reflect.TypeOf(tc.model) {
				t.Errorf("model = %T, want %T", m, tc.model)
			}
			if (e != nil) != tc.embedder {
				t.Errorf("embedder = %v, want present=%v", e, tc.embedder)
			}
			if tc.info != nil {
				tc.info(t, info)
			}
			for _, want := range tc.wantInDes {
				if !strings.Contains(info.Description, want) {
					t.Errorf("description %q lacks %q", info.Description, want)
				}
			}
			for _, secret := range []string{"sk-secret-123", "sk-ant-secret", "pw", "token=abc"} {
				if strings.Contains(info.Description, secret) || strings.Contains(info.String(), secret) {
					t.Errorf("description leaks %q: %s", secret, info.Description)
				}
			}
		})
	}
}

func TestFromEnvErrors(t *testing.T) {
	cases := []struct {
		name string
		env  map[string]string
		want []string
	}{
		{"unknown provider", map[string]string{"MARLOWE_MODEL_PROVIDER": "gemini", "MARLOWE_MODEL": "x"}, []string{"gemini", "not a known provider", "openai", "anthropic"}},
		{"missing model", map[string]string{"MARLOWE_MODEL_PROVIDER": "openai"}, []string{"MARLOWE_MODEL is required"}},
		{"model without provider", map[string]string{"MARLOWE_MODEL": "gpt"}, []string{"MARLOWE_MODEL_PROVIDER is empty"}},
		{"bad base URL", map[string]string{"MARLOWE_MODEL_PROVIDER": "openai", "MARLOWE_MODEL": "m", "MARLOWE_MODEL_BASE_URL": "localhost:11434"}, []string{"base URL"}},
		{"bad timeout", map[string]string{"MARLOWE_MODEL_PROVIDER": "openai", "MARLOWE_MODEL": "m", "MARLOWE_MODEL_TIMEOUT": "soon"}, []string{"MARLOWE_MODEL_TIMEOUT"}},
		{"negative timeout", map[string]string{"MARLOWE_MODEL_PROVIDER": "openai", "MARLOWE_MODEL": "m", "MARLOWE_MODEL_TIMEOUT": "-5s"}, []string{"positive"}},
		{"bad retries", map[string]string{"MARLOWE_MODEL_PROVIDER": "openai", "MARLOWE_MODEL": "m", "MARLOWE_MODEL_MAX_RETRIES": "lots"}, []string{"MARLOWE_MODEL_MAX_RETRIES"}},
		{"fallback without primary", map[string]string{"MARLOWE_MODEL_PROVIDER_FALLBACK": "openai", "MARLOWE_MODEL_FALLBACK": "m"}, []string{"needs a primary"}},
		{"fallback missing model", map[string]string{"MARLOWE_MODEL_PROVIDER": "openai", "MARLOWE_MODEL": "m", "MARLOWE_MODEL_PROVIDER_FALLBACK": "anthropic"}, []string{"MARLOWE_MODEL_FALLBACK is required"}},
		{"fallback unknown", map[string]string{"MARLOWE_MODEL_PROVIDER": "openai", "MARLOWE_MODEL": "m", "MARLOWE_MODEL_PROVIDER_FALLBACK": "x", "MARLOWE_MODEL_FALLBACK": "m"}, []string{"MARLOWE_MODEL_PROVIDER_FALLBACK"}},
		{"embedding URL without model", map[string]string{"MARLOWE_EMBEDDING_BASE_URL": "http://x/v1"}, []string{"MARLOWE_EMBEDDING_MODEL is empty"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, e, _, err := llm.FromEnv(env(tc.env))
			if err == nil {
				t.Fatalf("FromEnv accepted %v", tc.env)
			}
			if m != nil || e != nil {
				t.Errorf("FromEnv returned a model or embedder with an error")
			}
			for _, want := range tc.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q lacks %q", err, want)
				}
			}
		})
	}
}

// End to end: configuration → real SDK clients → fake servers.
func TestFromEnvAgainstFakes(t *testing.T) {
	prim, sec := llmtest.NewOpenAIServer(t), llmtest.NewAnthropicServer(t)
	prim.Enqueue(llmtest.Unavailable(), llmtest.Text("primary answers"))
	sec.Enqueue(llmtest.Text("fallback answers"))
	m, e, info, err := llm.FromEnv(env(map[string]string{
		"MARLOWE_MODEL_PROVIDER": "openai", "MARLOWE_MODEL": "fake-model", "MARLOWE_MODEL_BASE_URL": prim.URL,
		"MARLOWE_MODEL_MAX_RETRIES":       "0",
		"MARLOWE_MODEL_PROVIDER_FALLBACK": "anthropic", "MARLOWE_MODEL_FALLBACK": "claude-fake", "MARLOWE_MODEL_BASE_URL_FALLBACK": sec.URL,
		"ANTHROPIC_API_KEY": "main-key", "ANTHROPIC_API_KEY_FALLBACK": "fallback-key",
		"MARLOWE_EMBEDDING_MODEL": "embed-fake",
		"MARLOWE_MODEL_TIMEOUT":   "5s",
	}), llm.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatalf("FromEnv: %v", err)
	}
	if !info.Configured || info.Fallback == nil || info.Embedding == nil {
		t.Fatalf("info = %+v", info)
	}
	view := core.View{Messages: []core.Message{{Role: core.RoleUser, Text: "hi"}}}

	r, err := m.Step(context.Background(), view)
	if err != nil || r.Provider != "anthropic" || r.Text != "fallback answers" {
		t.Fatalf("first Step = %+v, %v; want the fallback", r, err)
	}
	if h := sec.Requests()[0].Header; !strings.Contains(h.Get("Authorization")+h.Get("X-Api-Key"), "fallback-key") {
		t.Errorf("fallback did not use ANTHROPIC_API_KEY_FALLBACK")
	}
	r, err = m.Step(context.Background(), view)
	if err != nil || r.Provider != "openai" || r.Text != "primary answers" {
		t.Fatalf("second Step = %+v, %v; want the primary", r, err)
	}
	if n := len(prim.Requests()); n != 2 {
		t.Errorf("%d primary requests, want 2 (MARLOWE_MODEL_MAX_RETRIES=0)", n)
	}

	vecs, model, err := e.Embed(context.Background(), []string{"x", "y"})
	if err != nil || len(vecs) != 2 || model != "embed-fake" {
		t.Fatalf("Embed = %d vectors, %q, %v", len(vecs), model, err)
	}
}
