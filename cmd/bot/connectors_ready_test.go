package main

import (
	"strings"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/connectors"
)

// /readyz has a connectors line naming each server's transport and state
// (a broken one with why) and never fails readiness for it.
func TestReadyzShowsEachConnectorAndNeverFails(t *testing.T) {
	cfg, err := connectors.Parse("mcp.json", []byte(`{"mcpServers": {
		"broken": {"command": "/nonexistent/mcp-server"},
		"off": {"url": "https://example.invalid/mcp", "disabled": true}
	}}`), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	m := connectors.New(cfg, connectors.Options{MinBackoff: time.Hour})
	m.Start(t.Context())
	t.Cleanup(func() { _ = m.Close() })
	_ = m.WaitReady(t.Context()) // every server settles: the broken one fails at once
	line, err := connectorsCheck(m).status(t.Context())
	if err != nil {
		t.Fatalf("a broken connector failed readiness: %v", err)
	}
	for _, want := range []string{"broken stdio down: starting /nonexistent/mcp-server", "off http disabled"} {
		if !strings.Contains(line, want) {
			t.Errorf("readyz connectors line %q lacks %q", line, want)
		}
	}
}
