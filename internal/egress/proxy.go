package egress

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"

	"golang.org/x/net/http/httpproxy"
)

// ProxyFunc names the proxy a request to u goes through; nil means a
// direct connection.
type ProxyFunc func(u *url.URL) (*url.URL, error)

// ProxyFromEnv reads the standard proxy settings through getenv, once:
// HTTPS_PROXY, HTTP_PROXY and NO_PROXY (each also in lower case, the upper
// case winning), with net/http's ProxyFromEnvironment semantics
// (golang.org/x/net/http/httpproxy: NO_PROXY names, domains and CIDRs; a
// loopback or "localhost" target is never proxied; HTTP_PROXY is ignored
// under CGI). It returns nil when no proxy is set. The composition root
// calls it at start with its configuration's getenv; nothing here reads
// the process environment on its own.
func ProxyFromEnv(getenv func(string) string) ProxyFunc {
	get := func(names ...string) string {
		for _, n := range names {
			if v := getenv(n); v != "" {
				return v
			}
		}
		return ""
	}
	cfg := httpproxy.Config{
		HTTPProxy:  get("HTTP_PROXY", "http_proxy"),
		HTTPSProxy: get("HTTPS_PROXY", "https_proxy"),
		NoProxy:    get("NO_PROXY", "no_proxy"),
		CGI:        getenv("REQUEST_METHOD") != "",
	}
	if cfg.HTTPProxy == "" && cfg.HTTPSProxy == "" {
		return nil
	}
	return ProxyFunc(cfg.ProxyFunc())
}

// TLSForTests sets the TLS client configuration (a test's own root CA), so
// tests can serve a platform host name over TLS. Like
// AllowLoopbackForTests it is an option in code only.
func TLSForTests(c *tls.Config) Option {
	return func(o *options) { o.tls = c }
}

// NewPlatformTransport is the transport for downloads from a platform's own
// file hosts (files.slack.com, api.telegram.org, Discord's CDN): the egress
// transport, except that a request proxy names a proxy for goes through
// that proxy. The caller (internal/filefetch) has already limited the
// target, and every redirect hop, to the platform's host names, so what a
// proxy connects to on the bot's behalf is always one of those names.
//
//   - A direct connection is the egress one: public addresses only,
//     checked on the resolved address at connect time.
//   - A proxied request dials the proxy and nothing else. The proxy's own
//     address is operator-configured and may be private, so the public
//     address check does not apply to it; the target's address is resolved
//     by the proxy, where no dial-time check can see it. That is why only
//     the platform-host downloads take a proxy: fetch_url, whose targets
//     come from the model, keeps NewClient (no proxy at all).
//
// With proxy nil it is exactly NewClient's transport.
func NewPlatformTransport(proxy ProxyFunc, opts ...Option) http.RoundTripper {
	o := newOptions(opts)
	direct := o.transport()
	if proxy == nil {
		return direct
	}
	via := o.transport()
	via.Proxy = func(r *http.Request) (*url.URL, error) {
		p, err := proxy(r.URL)
		if err == nil && p == nil {
			// RoundTrip only sends here what proxy named a proxy for;
			// never fall back to an unchecked direct dial.
			return nil, errors.New("no proxy for this request")
		}
		return p, err
	}
	d := &net.Dialer{Timeout: o.dialTimeout}
	via.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		return d.DialContext(ctx, network, addr) // the proxy's address: see above
	}
	return platformTransport{proxy: proxy, direct: direct, via: via}
}

type platformTransport struct {
	proxy       ProxyFunc
	direct, via *http.Transport
}

func (t platformTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	p, err := t.proxy(req.URL)
	if err != nil {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, fmt.Errorf("proxy for %s: %w", req.URL.Host, err)
	}
	if p != nil {
		return t.via.RoundTrip(req)
	}
	return t.direct.RoundTrip(req)
}
