package telegram

import (
	"bytes"
	"context"
	"crypto/tls"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"testing"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/internal/egress"
	"github.com/marlowe-bot/marlowe/internal/egress/egresstest"
)

// With the API URL left at https://api.telegram.org and HTTPS_PROXY set, a
// file is fetched through the proxy: getFile with the adapter's client and
// the file itself with the platform file transport both go through it (the
// proxy tunnels api.telegram.org to a TLS stand-in relaying to the fake,
// whose token check applies).
func TestFetchAttachmentTelegramThroughProxy(t *testing.T) {
	f := newFake(t)
	content := bytes.Repeat([]byte{0x4f, 0x67, 0x67, 0x53}, 300)
	id := f.HostFile(content)
	fake, _ := url.Parse(f.URL())
	relay := httputil.NewSingleHostReverseProxy(fake)
	stand, roots := egresstest.NewTLSServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Host = fake.Host
		relay.ServeHTTP(w, r)
	}), "api.telegram.org")
	proxy := egresstest.NewProxy(t, map[string]string{"api.telegram.org:443": stand.Listener.Addr().String()})
	for _, k := range []string{"HTTP_PROXY", "http_proxy", "https_proxy", "NO_PROXY", "no_proxy", "REQUEST_METHOD"} {
		t.Setenv(k, "")
	}
	t.Setenv("HTTPS_PROXY", proxy.URL)
	tlsCfg := &tls.Config{RootCAs: roots}
	proxyURL, _ := url.Parse(proxy.URL)
	// The API client, as http.DefaultTransport does with HTTPS_PROXY.
	api := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxyURL), TLSClientConfig: tlsCfg}}

	cfg := testConfig(f, ModePolling)
	cfg.APIURL = "https://api.telegram.org"
	files := egress.NewPlatformTransport(egress.ProxyFromEnv(os.Getenv), egress.TLSForTests(tlsCfg))
	a, _ := newAdapter(t, cfg, WithHTTPClient(api), WithFileTransport(files))
	got, err := a.FetchAttachment(context.Background(), core.Attachment{ID: id, Kind: "voice", Ref: id}, 1<<20)
	if err != nil || !bytes.Equal(got, content) {
		t.Fatalf("fetch through the proxy: %v (%d bytes)", err, len(got))
	}
	if n := f.Downloads(id); n != 1 {
		t.Errorf("the fake served %d downloads, want 1", n)
	}
	// One tunnel for getFile (the API client), one for the file (the file
	// transport keeps its own connections).
	if tun := proxy.Tunnels(); len(tun) != 2 || tun[0] != "api.telegram.org:443" || tun[1] != "api.telegram.org:443" {
		t.Errorf("tunnels %v, want two to api.telegram.org:443", tun)
	}
}
