package main

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/signin/signintest"
	"github.com/marlowe-bot/marlowe/vault"
)

// doctor on the secrets key: off without one, a bad one named (never
// echoed), a good one with whether MARLOWE_PUBLIC_URL is set.
func TestDoctorSignIn(t *testing.T) {
	bad := "c2hvcnQ=" // "short"
	for _, tc := range []struct {
		name string
		vars map[string]string
		want string
	}{
		{"off", map[string]string{}, "✓ sign-in: off"},
		{"bad key", map[string]string{"MARLOWE_SECRETS_KEY": bad}, "✗ sign-in: MARLOWE_SECRETS_KEY: decodes to 5 bytes, want 32"},
		{"bad old key", map[string]string{"MARLOWE_SECRETS_KEY": vault.NewKey(), "MARLOWE_SECRETS_KEY_OLD": "nope!"}, "✗ sign-in: MARLOWE_SECRETS_KEY_OLD, key 1: not base64"},
		{"no public url", map[string]string{"MARLOWE_SECRETS_KEY": vault.NewKey()}, "MARLOWE_PUBLIC_URL is not set"},
		{"public url", map[string]string{"MARLOWE_SECRETS_KEY": vault.NewKey(), "MARLOWE_PUBLIC_URL": "https://marlowe.example"}, "redirect URI https://marlowe.example/connect/callback"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lines := doctorLines(t, tc.vars, "sign-in")
			if len(lines) != 1 || !strings.Contains(lines[0], tc.want) {
				t.Fatalf("doctor: %q, want %q", lines, tc.want)
			}
			if strings.Contains(lines[0], bad) {
				t.Errorf("doctor echoed the key: %s", lines[0])
			}
		})
	}
}

// A connector in person mode: serve needs MARLOWE_SECRETS_KEY; doctor
// checks its discovery (a server with no protected-resource metadata
// fails, naming it) and whether MARLOWE_PUBLIC_URL is set.
func TestDoctorChecksPersonServers(t *testing.T) {
	dir := t.TempDir()
	file := dir + "/mcp.json"
	// A URL that answers nothing OAuth: its discovery fails.
	if err := os.WriteFile(file, []byte(`{"mcpServers":{"gh":{"url":"http://`+refusedAddr(t)+`/mcp","identity":"person"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	lines := doctorLines(t, map[string]string{"MARLOWE_MCP_CONFIG": file}, "sign-in")
	if len(lines) != 1 || !strings.Contains(lines[0], "✗ sign-in: 1 connector(s) act as each person but MARLOWE_SECRETS_KEY is not set") {
		t.Fatalf("no key: %q", lines)
	}
	lines = doctorLines(t, map[string]string{"MARLOWE_MCP_CONFIG": file, "MARLOWE_SECRETS_KEY": vault.NewKey()}, "sign-in")
	if len(lines) != 1 || !strings.Contains(lines[0], "✗ sign-in: MARLOWE_PUBLIC_URL is not set") {
		t.Fatalf("no public url: %q", lines)
	}
	lines = doctorLines(t, map[string]string{"MARLOWE_MCP_CONFIG": file, "MARLOWE_SECRETS_KEY": vault.NewKey(), "MARLOWE_PUBLIC_URL": "https://m.example"}, "sign-in gh")
	if len(lines) != 1 || !strings.Contains(lines[0], "✗ sign-in gh: no protected resource metadata") {
		t.Fatalf("discovery: %q", lines)
	}
	_, err := runBot(t, env(map[string]string{"MARLOWE_DATA_DIR": t.TempDir(), "MARLOWE_MCP_CONFIG": file, "MARLOWE_HTTP_ADDR": "127.0.0.1:0"}), "", "serve")
	if err == nil || !strings.Contains(err.Error(), "MARLOWE_SECRETS_KEY") {
		t.Fatalf("serve without a key: %v", err)
	}

	// A server whose authorization server offers client ID metadata
	// documents and no dynamic registration: fine with an https public
	// URL (the client id is Marlowe's document there), named as the fix
	// with an http one.
	as := signintest.NewAS(t)
	as.AcceptClientMetadataDocuments(http.DefaultClient)
	cimd := dir + "/cimd.json"
	if err := os.WriteFile(cimd, []byte(`{"mcpServers":{"gh":{"url":"`+signintest.NewProtectedMCP(t, as)+`","identity":"person"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ public, want string }{
		{"https://m.example", "✓ sign-in gh: resource http://"},
		{"https://m.example", "client ID metadata document https://m.example/connect/client-metadata.json"},
		{"http://m.example", "✗ sign-in gh: " + as.URL() + ": the authorization server accepts only client ID metadata documents, which need an https MARLOWE_PUBLIC_URL"},
	} {
		lines := doctorLines(t, map[string]string{"MARLOWE_MCP_CONFIG": cimd, "MARLOWE_SECRETS_KEY": vault.NewKey(), "MARLOWE_PUBLIC_URL": tc.public}, "sign-in gh")
		if len(lines) != 1 || !strings.Contains(lines[0], tc.want) {
			t.Fatalf("client ID metadata document, public URL %s: %q, want %q", tc.public, lines, tc.want)
		}
	}
	// With a person server, an http public URL is a warning on the
	// sign-in line: links, cookie and code would travel in clear.
	for public, want := range map[string]string{"http://m.example": "! sign-in: secrets key", "https://m.example": "✓ sign-in: secrets key"} {
		lines := doctorLines(t, map[string]string{"MARLOWE_MCP_CONFIG": cimd, "MARLOWE_SECRETS_KEY": vault.NewKey(), "MARLOWE_PUBLIC_URL": public}, "sign-in")
		if len(lines) != 1 || !strings.HasPrefix(lines[0], want) || strings.Contains(lines[0], "not https") == strings.HasPrefix(public, "https") {
			t.Fatalf("public URL %s: %q, want %q", public, lines, want)
		}
	}
}

// sweepCounter is a sign-in service whose sweeps are handed to the test;
// every one fails, as with the database away.
type sweepCounter struct{ swept chan []string }

func (s sweepCounter) SweepPending(_ context.Context, platforms []string) (int, error) {
	s.swept <- platforms
	return 0, errors.New("database went away")
}

// serve's sweep loop sweeps the configured platforms again and again (a
// pending sign-in nobody confirms is revoked within a period, on a quiet
// platform too), a failed sweep included, and returns once serve's
// context ends.
func TestSweepSignInsRepeatsUntilStopped(t *testing.T) {
	svc := sweepCounter{swept: make(chan []string)}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		sweepSignIns(ctx, svc, []string{"slack", "telegram"}, time.Millisecond, slog.New(slog.DiscardHandler))
		close(done)
	}()
	for range 3 {
		select {
		case got := <-svc.swept:
			if strings.Join(got, ",") != "slack,telegram" {
				t.Fatalf("swept %v", got)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the loop stopped sweeping")
		}
	}
	cancel()
	for {
		select {
		case <-svc.swept: // a sweep that had begun
		case <-done:
			return
		case <-time.After(10 * time.Second):
			t.Fatal("the loop outlived serve's context")
		}
	}
}
