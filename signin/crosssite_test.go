package signin_test

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/marlowe-bot/marlowe/signin"
)

// Sign-in CSRF: Mallory's own link, auto-submitted by her web page in
// Alice's browser. On the old code the POST went through: Alice's browser
// was sent to the authorization server (which skips consent for a client
// it knows), the callback stored Alice's account pending for Mallory, and
// Mallory confirmed it on her own card. Now a POST another site sent is
// refused before the link is used; the landing page's own form (same
// origin, or a client that says nothing of where it came from) works.
func TestSignInStartRefusesCrossSitePosts(t *testing.T) {
	r := newRig(t)
	r.as.SetUser("alice") // whoever is logged in at the server in this browser
	link, _ := r.svc.Link("slack", "UMALLORY", "github")
	lu, _ := url.Parse(link)
	tok := lu.Query().Get("t")

	post := func(headers map[string]string) (int, string, string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, r.bot.URL+signin.StartPath,
			strings.NewReader(url.Values{"t": {tok}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		resp, err := browser("/").Do(req) // follows no redirect
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Location"), string(b)
	}
	for _, tc := range []struct {
		name    string
		headers map[string]string
	}{
		{"cross-site fetch metadata", map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"}},
		{"same-site other origin", map[string]string{"Sec-Fetch-Site": "same-site", "Origin": "http://other.127.0.0.1.nip.io"}},
		{"foreign origin only", map[string]string{"Origin": "https://evil.example"}},
		{"opaque origin", map[string]string{"Origin": "null"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, loc, page := post(tc.headers)
			if code != http.StatusForbidden || loc != "" || !strings.Contains(page, "another web site") {
				t.Fatalf("a cross-site POST: %d Location=%q %s", code, loc, page)
			}
		})
	}
	if len(r.ev.kinds()) != 0 {
		t.Fatalf("something happened: %v", r.ev.kinds())
	}
	// The link was not used up: its own page's form still starts it.
	code, loc, page := post(map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": r.bot.URL})
	if code != http.StatusSeeOther || !strings.HasPrefix(loc, r.as.URL()) {
		t.Fatalf("the landing page's own POST: %d %q %s", code, loc, page)
	}
}
