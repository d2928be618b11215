package tools_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/marlowe-bot/marlowe/core/coretest"
	"github.com/marlowe-bot/marlowe/internal/egress"
	"github.com/marlowe-bot/marlowe/tools"
)

// privateTargets are addresses fetch_url must never reach, directly or
// through anything else.
var privateTargets = []string{
	"http://100.100.100.200/latest/meta-data/", // Alibaba Cloud metadata, in CGNAT 100.64/10
	"http://169.254.169.254/latest/meta-data/", // AWS/GCP/Azure metadata
	"http://[::ffff:169.254.169.254]/",
	"http://[64:ff9b::a9fe:a9fe]/", // NAT64 of 169.254.169.254
	"http://[fd00:ec2::254]/",      // AWS IPv6 metadata
	"http://10.0.0.1/",
	"http://0.0.0.0:8081/healthz",
	"http://198.18.0.1/",
	"http://240.0.0.1/",
}

// proxyChildEnv marks the re-executed test binary that runs with
// HTTP_PROXY set from its first instruction (net/http reads the proxy
// variables once per process, so a t.Setenv would come too late).
const proxyChildEnv = "MARLOWE_TEST_PROXY_CHILD"

// TestFetchURLIgnoresTheEnvironmentProxy: with HTTP_PROXY and HTTPS_PROXY
// pointing at a listener, fetch_url of private and metadata addresses is
// refused and the proxy receives nothing. The client allows loopback here,
// so a client that used the proxy could reach it: only ignoring it passes.
func TestFetchURLIgnoresTheEnvironmentProxy(t *testing.T) {
	if os.Getenv(proxyChildEnv) != "" {
		t.Skip("parent only")
	}
	var hits atomic.Int64
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1) // before the response: the child cannot finish first
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprint(w, "proxied: AccessKeyId=SECRET")
	}))
	defer proxy.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^TestFetchURLProxyChild$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), proxyChildEnv+"=1",
		"HTTP_PROXY="+proxy.URL, "HTTPS_PROXY="+proxy.URL, "http_proxy="+proxy.URL, "https_proxy="+proxy.URL,
		"NO_PROXY=", "no_proxy=")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestFetchURLProxyChild") {
		t.Errorf("child: %v\n%s", err, out)
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the proxy received %d requests; want none", n)
	}
}

func TestFetchURLProxyChild(t *testing.T) {
	if os.Getenv(proxyChildEnv) == "" {
		t.Skip("run by TestFetchURLIgnoresTheEnvironmentProxy")
	}
	if os.Getenv("HTTP_PROXY") == "" {
		t.Fatal("HTTP_PROXY not set in the child")
	}
	tc := tctx(coretest.NewFakeSurface("test", "UBOT"), nil)
	for _, name := range []string{"strict", "loopback-for-tests"} {
		o := tools.Options{}
		if name != "strict" {
			o.HTTPClient = egress.NewClient(egress.AllowLoopbackForTests())
		}
		f := tools.FetchURL(o)
		for _, u := range privateTargets {
			obs, err := run(t, f, tc, fmt.Sprintf(`{"url":%q}`, u))
			if err == nil || !strings.Contains(err.Error(), "non-public") {
				t.Errorf("%s: fetch %s = %q, %v; want a non-public refusal", name, u, obs.Text, err)
			}
		}
	}
}

// TestFetchURLRefusesRedirectsInside: a public-looking page that redirects
// to a private or metadata address is refused at the redirect, even with a
// client that may reach loopback (the page's own server).
func TestFetchURLRefusesRedirectsInside(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/go", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, r.URL.Query().Get("to"), http.StatusFound)
	})
	mux.HandleFunc("/ok", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprint(w, "fine")
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	tc := tctx(coretest.NewFakeSurface("test", "UBOT"), nil)
	f := tools.FetchURL(tools.Options{HTTPClient: egress.NewClient(egress.AllowLoopbackForTests())})
	for _, to := range privateTargets {
		u := srv.URL + "/go?to=" + to
		obs, err := run(t, f, tc, fmt.Sprintf(`{"url":%q}`, u))
		if err == nil || !strings.Contains(err.Error(), "non-public") {
			t.Errorf("redirect to %s = %q, %v; want a non-public refusal", to, obs.Text, err)
		}
	}
	// A same-host redirect is still followed.
	obs, err := run(t, f, tc, fmt.Sprintf(`{"url":%q}`, srv.URL+"/go?to=/ok"))
	if err != nil || !strings.Contains(obs.Text, "fine") {
		t.Errorf("same-host redirect = %q, %v", obs.Text, err)
	}
	// A redirect to another scheme is refused.
	if _, err := run(t, f, tc, fmt.Sprintf(`{"url":%q}`, srv.URL+"/go?to=file:///etc/passwd")); err == nil {
		t.Error("redirect to file:// followed")
	}
}

// TestFetchURLRefusesNamesThatResolveInside: the check is on the resolved
// address, so a name for loopback is refused like the literal.
func TestFetchURLRefusesNamesThatResolveInside(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "local secret")
	}))
	defer srv.Close()
	_, port, _ := strings.Cut(strings.TrimPrefix(srv.URL, "http://"), ":")
	tc := tctx(coretest.NewFakeSurface("test", "UBOT"), nil)
	obs, err := run(t, tools.FetchURL(tools.Options{}), tc, fmt.Sprintf(`{"url":"http://localhost:%s/"}`, port))
	if err == nil || !strings.Contains(err.Error(), "non-public") {
		t.Errorf("fetch of localhost = %q, %v; want a non-public refusal", obs.Text, err)
	}
}
