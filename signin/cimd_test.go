package signin_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/signin"
	"github.com/marlowe-bot/marlowe/signin/signintest"
)

// An authorization server that offers client ID metadata documents and no
// dynamic registration (the MCP 2025-11-25 preference), with no client id
// configured: Marlowe's client id is the https URL of its own document,
// which the server fetches and whose one redirect URI it holds the request
// to. The old code refused the sign-in ("offers no dynamic client
// registration"). With an http public URL no document is offered (a client
// id URL must be https): the sign-in is refused with the reason.
func TestSignInWithClientIDMetadataDocument(t *testing.T) {
	for _, tc := range []struct {
		name  string
		start func(http.Handler) *httptest.Server
		https bool
	}{
		{"https public URL", httptest.NewTLSServer, true},
		{"http public URL", httptest.NewServer, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRigAt(t, tc.start, "")
			ctx := t.Context()
			r.as.AcceptClientMetadataDocuments(r.bot.Client())
			r.as.SetUser("alice")
			docURL := r.bot.URL + signin.ClientMetadataPath

			resp, err := r.bot.Client().Get(docURL)
			if err != nil {
				t.Fatal(err)
			}
			var doc map[string]any
			_ = json.NewDecoder(resp.Body).Decode(&doc)
			resp.Body.Close()
			if !tc.https {
				if resp.StatusCode != http.StatusNotFound {
					t.Fatalf("a client metadata document under an http public URL: %d %v", resp.StatusCode, doc)
				}
				link, _ := r.svc.Link("slack", "U1", "github")
				code, page := follow(t, browserWith(r.bot.Client().Transport, ""), link)
				if code != http.StatusBadGateway || !strings.Contains(page, "https MARLOWE_PUBLIC_URL") {
					t.Fatalf("sign-in without an https public URL: %d %s", code, page)
				}
				if got := r.as.ClientMetadataFetches(); len(got) != 0 {
					t.Fatalf("the server fetched %v", got)
				}
				return
			}
			if resp.StatusCode != 200 || doc["client_id"] != docURL || doc["token_endpoint_auth_method"] != "none" ||
				len(doc["redirect_uris"].([]any)) != 1 || doc["redirect_uris"].([]any)[0] != r.bot.URL+signin.CallbackPath {
				t.Fatalf("client metadata document: %d %v", resp.StatusCode, doc)
			}
			if _, secret := doc["client_secret"]; secret {
				t.Fatal("the document holds a secret")
			}

			link, _ := r.svc.Link("slack", "U1", "github")
			if code, page := follow(t, browserWith(r.bot.Client().Transport, ""), link); code != 200 || !strings.Contains(page, "Nothing is connected until they confirm") {
				t.Fatalf("sign-in: %d %s", code, page)
			}
			if got := r.as.ClientMetadataFetches(); len(got) != 1 || got[0] != docURL {
				t.Fatalf("the server fetched client documents %v, want [%s]", got, docURL)
			}
			if ev := r.ev.confirm(t, r.svc, "U1"); !strings.Contains(ev.Account, "alice") {
				t.Fatalf("card names %q", ev.Account)
			}
			tok, err := r.svc.Token(ctx, "slack", "U1", "github")
			if err != nil {
				t.Fatal(err)
			}
			if who, err := signintest.Whoami(ctx, r.mcpURL, tok); err != nil || who != "alice" {
				t.Fatalf("whoami = %q, %v", who, err)
			}
			// Refresh and revocation with the document's URL as client id.
			r.advance(time.Hour - time.Minute)
			fresh, err := r.svc.Token(ctx, "slack", "U1", "github")
			if err != nil || fresh == tok || refreshes(r.as) != 1 {
				t.Fatalf("refresh: same=%v err=%v", fresh == tok, err)
			}
			if ok, err := r.svc.Disconnect(ctx, "slack", "U1", "github", "U1"); !ok || err != nil {
				t.Fatalf("disconnect: %v %v", ok, err)
			}
			if _, err := signintest.Whoami(ctx, r.mcpURL, fresh); err == nil {
				t.Fatal("a revoked token still works")
			}
			r.noSecrets()
		})
	}
}
