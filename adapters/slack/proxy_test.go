package slack

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/marlowe-bot/marlowe/adapters/slack/slackfake"
	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/internal/egress"
	"github.com/marlowe-bot/marlowe/internal/egress/egresstest"
)

// A deployment that reaches Slack only through a proxy (HTTPS_PROXY)
// downloads files.slack.com files through it: the proxy resolves the name
// (here it tunnels to a TLS stand-in for files.slack.com that relays to
// the fake, whose token check applies). The host allow-list still holds
// through the proxy: a URL on another host is refused before any request,
// and a redirect off Slack's host is not followed (the proxy is never
// asked for that host).
func TestFetchAttachmentSlackThroughProxy(t *testing.T) {
	f := newFake(t, func(c *slackfake.Config) { c.BotToken = "xoxb-right" })
	content := bytes.Repeat([]byte("a,b\n1,2\n"), 50)
	file := f.HostFile("data.csv", "text/csv", content)
	u0, _ := url.Parse(f.APIURL())
	fake := &url.URL{Scheme: u0.Scheme, Host: u0.Host}
	relay := httputil.NewSingleHostReverseProxy(fake)
	stand, roots := egresstest.NewTLSServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/away" {
			http.Redirect(w, r, "https://evil.example.com/steal", http.StatusFound)
			return
		}
		r.Host = fake.Host
		relay.ServeHTTP(w, r)
	}), "files.slack.com", "evil.example.com")
	proxy := egresstest.NewProxy(t, map[string]string{
		"files.slack.com:443":  stand.Listener.Addr().String(),
		"evil.example.com:443": stand.Listener.Addr().String(), // reachable, if it were ever asked
	})
	for _, k := range []string{"HTTP_PROXY", "http_proxy", "https_proxy", "NO_PROXY", "no_proxy", "REQUEST_METHOD"} {
		t.Setenv(k, "")
	}
	t.Setenv("HTTPS_PROXY", proxy.URL)

	cfg := testConfig(f, ModeSocket)
	cfg.BotToken = "xoxb-right"
	files := egress.NewPlatformTransport(egress.ProxyFromEnv(os.Getenv), egress.TLSForTests(&tls.Config{RootCAs: roots}))
	a, _ := newAdapter(t, cfg, WithFileTransport(files))
	u, _ := url.Parse(file["url_private_download"].(string))
	at := core.Attachment{ID: file["id"].(string), Name: "data.csv", Type: "text/csv", Ref: "https://files.slack.com" + u.RequestURI()}
	ctx := context.Background()

	got, err := a.FetchAttachment(ctx, at, 1<<20)
	if err != nil || !bytes.Equal(got, content) {
		t.Fatalf("fetch through the proxy: %v (%d bytes)", err, len(got))
	}
	if n := f.Downloads(at.ID); n != 1 {
		t.Errorf("the fake served %d downloads, want 1", n)
	}
	if tun := proxy.Tunnels(); len(tun) == 0 || tun[0] != "files.slack.com:443" {
		t.Errorf("tunnels %v, want files.slack.com:443", tun)
	}

	foreign := at
	foreign.Ref = "https://evil.example.com/steal"
	if _, err := a.FetchAttachment(ctx, foreign, 1<<20); !errors.Is(err, core.ErrAttachmentHost) {
		t.Errorf("foreign host through the proxy: %v, want ErrAttachmentHost", err)
	}
	away := at
	away.Ref = "https://files.slack.com/away"
	if _, err := a.FetchAttachment(ctx, away, 1<<20); !errors.Is(err, core.ErrAttachmentHost) || !strings.Contains(err.Error(), "redirected") {
		t.Errorf("redirect off Slack's host: %v, want ErrAttachmentHost", err)
	}
	if slices.Contains(proxy.Tunnels(), "evil.example.com:443") {
		t.Errorf("the proxy was asked for evil.example.com: %v", proxy.Tunnels())
	}
}
