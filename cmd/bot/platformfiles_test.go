package main

import (
	"context"
	"net/http"
	"slices"
	"testing"

	"github.com/marlowe-bot/marlowe/internal/egress/egresstest"
)

// The composition root reads HTTPS_PROXY from its configuration once and
// sends platform file downloads through that proxy (which is asked for a
// tunnel to the platform's host); without the setting it builds no proxy.
func TestPlatformFilesHonourTheProxySetting(t *testing.T) {
	proxy := egresstest.NewProxy(t, nil) // records, routes nothing (502)
	env := map[string]string{"HTTPS_PROXY": proxy.URL}
	rt := platformFiles(config{Getenv: func(k string) string { return env[k] }})
	delete(env, "HTTPS_PROXY") // read once, at start: a later change is not seen
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, "https://files.slack.com/files-pri/T1-F1/download/a.csv", nil)
	if resp, err := rt.RoundTrip(req); err == nil {
		resp.Body.Close()
		t.Fatal("the proxy routes nothing, yet the download succeeded")
	}
	if got := proxy.Tunnels(); !slices.Equal(got, []string{"files.slack.com:443"}) {
		t.Errorf("tunnels %v, want files.slack.com:443", got)
	}
}
