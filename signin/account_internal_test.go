package signin

import (
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"golang.org/x/oauth2"
)

// The card names the account only from an ID token of this issuer: a
// token claiming another issuer, or none, shows the issuer and the time.
func TestAccountOfNamesOnlyThisIssuersIDToken(t *testing.T) {
	at := time.Date(2026, 12, 6, 2, 50, 0, 0, time.UTC)
	idt := func(claims string) string {
		return "eyJhbGciOiJub25lIn0." + base64.RawURLEncoding.EncodeToString([]byte(claims)) + ".x"
	}
	for _, c := range []struct{ name, idToken, want string }{
		{"email", idt(`{"iss":"https://as.example/","sub":"42","email":"alice@example.com"}`), "alice@example.com (42)"},
		{"username", idt(`{"iss":"https://as.example","sub":"42","preferred_username":"alice"}`), "alice (42)"},
		{"sub only", idt(`{"iss":"https://as.example","sub":"42"}`), "42"},
		{"other issuer", idt(`{"iss":"https://evil.example","sub":"42","email":"ceo@example.com"}`), "an account at https://as.example, signed in Dec 6 02:50:00 UTC"},
		{"malformed", "not.a-token", "an account at https://as.example, signed in Dec 6 02:50:00 UTC"},
		{"none", "", "an account at https://as.example, signed in Dec 6 02:50:00 UTC"},
	} {
		t.Run(c.name, func(t *testing.T) {
			tok := &oauth2.Token{AccessToken: "x"}
			if c.idToken != "" {
				tok = tok.WithExtra(map[string]any{"id_token": c.idToken})
			}
			if got := accountOf(tok, "https://as.example", at); !strings.EqualFold(got, c.want) {
				t.Fatalf("accountOf = %q, want %q", got, c.want)
			}
		})
	}
}
