package egress_test

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"testing"

	"github.com/marlowe-bot/marlowe/internal/egress"
	"github.com/marlowe-bot/marlowe/internal/egress/egresstest"
)

func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// ProxyFromEnv follows net/http's rules: HTTPS_PROXY for https targets,
// the upper-case name over the lower-case one, NO_PROXY exempting names,
// and no proxy at all when none is set.
func TestProxyFromEnv(t *testing.T) {
	target := &url.URL{Scheme: "https", Host: "files.slack.com"}
	cases := []struct {
		name string
		env  map[string]string
		want string // "" = direct
	}{
		{"nothing set", map[string]string{}, ""},
		{"HTTPS_PROXY", map[string]string{"HTTPS_PROXY": "http://proxy.corp:3128"}, "http://proxy.corp:3128"},
		{"lower case", map[string]string{"https_proxy": "http://lower:3128"}, "http://lower:3128"},
		{"upper case wins", map[string]string{"HTTPS_PROXY": "http://upper:3128", "https_proxy": "http://lower:3128"}, "http://upper:3128"},
		{"HTTP_PROXY is for http only", map[string]string{"HTTP_PROXY": "http://plain:3128"}, ""},
		{"NO_PROXY domain", map[string]string{"HTTPS_PROXY": "http://proxy.corp:3128", "NO_PROXY": ".slack.com"}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pf := egress.ProxyFromEnv(env(c.env))
			if pf == nil {
				if c.want != "" {
					t.Fatalf("no proxy func; want %s", c.want)
				}
				return
			}
			got, err := pf(target)
			if err != nil {
				t.Fatal(err)
			}
			if (got == nil && c.want != "") || (got != nil && got.String() != c.want) {
				t.Errorf("proxy for %s = %v; want %q", target, got, c.want)
			}
		})
	}
}

// A download from a platform host goes through the configured CONNECT
// proxy (which resolves the name: here it tunnels to a local TLS stand-in
// for files.slack.com). A direct connection, one the proxy settings
// exempt, is still the egress one: a loopback target is refused at
// connect time although a proxy is configured. fetch_url's client
// (NewClient) ignores the proxy altogether.
func TestPlatformTransportThroughProxy(t *testing.T) {
	srv, roots := egresstest.NewTLSServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "file via "+r.Host)
	}), "files.slack.com")
	proxy := egresstest.NewProxy(t, map[string]string{"files.slack.com:443": srv.Listener.Addr().String()})
	pf := egress.ProxyFromEnv(env(map[string]string{"HTTPS_PROXY": proxy.URL}))
	tlsCfg := egress.TLSForTests(&tls.Config{RootCAs: roots})
	rt := egress.NewPlatformTransport(pf, tlsCfg)
	ctx := context.Background()

	get := func(rt http.RoundTripper, u string) (string, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		resp, err := rt.RoundTrip(req)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}

	body, err := get(rt, "https://files.slack.com/files-pri/T1-F1/download/a.csv")
	if err != nil || body != "file via files.slack.com" {
		t.Fatalf("through the proxy: %q, %v", body, err)
	}
	if got := proxy.Tunnels(); !slices.Equal(got, []string{"files.slack.com:443"}) {
		t.Errorf("tunnels %v, want one to files.slack.com:443", got)
	}

	// Direct (loopback is never proxied): the egress dial check refuses it.
	local := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "inside") }))
	defer local.Close()
	if body, err := get(rt, local.URL); !errors.Is(err, egress.ErrDenied) {
		t.Errorf("direct loopback with a proxy configured: %q, %v; want ErrDenied", body, err)
	}

	// fetch_url's client never uses the proxy: the same platform name is
	// dialled directly (and so never reaches the stand-in).
	before := len(proxy.Tunnels())
	if body, err := get(egress.NewClient(tlsCfg).Transport, "https://files.slack.com/x"); err == nil && body == "file via files.slack.com" {
		t.Errorf("NewClient reached the proxied stand-in")
	}
	if n := len(proxy.Tunnels()); n != before {
		t.Errorf("NewClient asked the proxy for a tunnel")
	}

	// No proxy configured: the platform transport is the egress one.
	if _, err := get(egress.NewPlatformTransport(nil), local.URL); !errors.Is(err, egress.ErrDenied) {
		t.Errorf("no proxy, loopback: %v; want ErrDenied", err)
	}
}
