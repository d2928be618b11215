package main

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/marlowe-bot/marlowe/core"
)

// TestSandboxStreamSetting: MARLOWE_SANDBOX_STREAM unset or 1 streams the
// sandbox's runs, 0 keeps the checklist, anything else refuses to start.
func TestSandboxStreamSetting(t *testing.T) {
	thread := core.Scope{Platform: "sandbox", Workspace: "local", Channel: "general", Thread: "1.000001"}
	for _, c := range []struct {
		value   string
		streams bool
	}{{"", true}, {"1", true}, {"0", false}} {
		env := map[string]string{"MARLOWE_SANDBOX_ADDR": "127.0.0.1:0", "MARLOWE_SANDBOX_STREAM": c.value}
		cfg := config{DataDir: t.TempDir(), Getenv: func(k string) string { return env[k] }}
		set, err := newSurfaces(cfg, nil, nil, nil, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err != nil {
			t.Fatalf("MARLOWE_SANDBOX_STREAM=%q: %v", c.value, err)
		}
		if got := set.sandbox.Streams(context.Background(), thread); got != c.streams {
			t.Errorf("MARLOWE_SANDBOX_STREAM=%q: streams %v, want %v", c.value, got, c.streams)
		}
	}
	env := map[string]string{"MARLOWE_SANDBOX_STREAM": "yes"}
	cfg := config{DataDir: t.TempDir(), Getenv: func(k string) string { return env[k] }}
	if _, err := newSurfaces(cfg, nil, nil, nil, nil, slog.New(slog.NewTextHandler(io.Discard, nil))); err == nil || !strings.Contains(err.Error(), "MARLOWE_SANDBOX_STREAM") {
		t.Errorf("MARLOWE_SANDBOX_STREAM=yes: %v, want an error naming the variable", err)
	}
}
