package signin_test

import (
	"io"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/marlowe-bot/marlowe/signin"
	"github.com/marlowe-bot/marlowe/signin/signintest"
)

// A bot whose MARLOWE_PUBLIC_URL has a path (https://example.com/marlowe,
// behind a proxy that strips it): the landing page's form posts under
// that path and the browser's binding cookie is scoped to it, so the
// callback, under it too, gets the cookie. The old code posted the form
// to /connect at the host's root (outside the bot) and scoped the cookie
// to /connect, which the browser never sends to /marlowe/connect/callback.
// Everything is done as a browser does it: the form's action, relative
// to the page.
func TestSignInUnderAPathPrefix(t *testing.T) {
	r := newRigAt(t, httptest.NewServer, "/marlowe")
	r.as.SetUser("alice")
	link, _ := r.svc.Link("slack", "U1", "github")
	if !strings.HasPrefix(link, r.bot.URL+"/marlowe"+signin.StartPath+"?") {
		t.Fatalf("link %s is not under the public URL", link)
	}
	b := browser("")
	code, page := get(t, b, link)
	m := regexp.MustCompile(`<form method="post" action="([^"]+)"`).FindStringSubmatch(page)
	if code != 200 || m == nil {
		t.Fatalf("landing: %d %s", code, page)
	}
	lu, _ := url.Parse(link)
	action, err := lu.Parse(m[1])
	if err != nil {
		t.Fatal(err)
	}
	resp, err := b.PostForm(action.String(), url.Values{"t": {lu.Query().Get("t")}})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "Nothing is connected until they confirm") {
		t.Fatalf("sign-in (form posted to %s, ended at %s): %d %s", action, resp.Request.URL, resp.StatusCode, body)
	}
	r.ev.confirm(t, r.svc, "U1")
	tok, err := r.svc.Token(t.Context(), "slack", "U1", "github")
	if err != nil {
		t.Fatal(err)
	}
	if who, err := signintest.Whoami(t.Context(), r.mcpURL, tok); err != nil || who != "alice" {
		t.Fatalf("whoami = %q, %v", who, err)
	}
}
