package sandbox

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// The Host allow-list holds whatever the bind address: bound to every
// interface (as in a container), a rebinding name is still refused; loopback
// names and the configured hosts are served; "*" turns the check off.
func TestHostAllowListHoldsBeyondLoopback(t *testing.T) {
	cases := []struct {
		addr  string
		hosts []string
		host  string
		ok    bool
	}{
		{"0.0.0.0:8080", nil, "evil.example:8080", false},
		{"0.0.0.0:8080", nil, "evil.example", false},
		{"0.0.0.0:8080", nil, "10.0.0.5:8080", false},
		{"0.0.0.0:8080", nil, "localhost:8080", true},
		{"0.0.0.0:8080", nil, "127.0.0.1:8080", true},
		{"0.0.0.0:8080", nil, "[::1]:8080", true},
		{"0.0.0.0:8080", []string{"marlowe.lan", " Box.Local. "}, "MARLOWE.lan:8080", true},
		{"0.0.0.0:8080", []string{"marlowe.lan", " Box.Local. "}, "box.local", true},
		{"0.0.0.0:8080", []string{"marlowe.lan"}, "evil.example:8080", false},
		{"0.0.0.0:8080", []string{"marlowe.lan"}, "marlowe.lan.evil.example", false},
		{"[::]:8080", []string{"10.0.0.5"}, "10.0.0.5:8080", true},
		{"127.0.0.1:8080", nil, "evil.example:8080", false},
		{"0.0.0.0:8080", []string{"*"}, "anything.example", true},
	}
	for _, c := range cases {
		s, err := New(Config{Addr: c.addr, Hosts: c.hosts})
		if err != nil {
			t.Fatal(err)
		}
		req := httptest.NewRequest(http.MethodGet, "/api/workspace", nil)
		req.Host = c.host
		w := httptest.NewRecorder()
		s.Handler().ServeHTTP(w, req)
		if got := w.Code == http.StatusOK; got != c.ok {
			t.Errorf("bound %s, hosts %q, Host %q: status %d; want served=%v", c.addr, c.hosts, c.host, w.Code, c.ok)
		}
		if !c.ok && w.Code != http.StatusMisdirectedRequest {
			t.Errorf("Host %q refused with %d, want 421", c.host, w.Code)
		}
	}
}

// Bound on every interface (as in a container), the workspace's URL is
// one a browser here opens: localhost, never "http://[::]:8080/" (which
// is no address, and a Host the workspace refuses).
func TestWildcardListenURLIsLocalhost(t *testing.T) {
	s := newSandbox(t, Config{Addr: "0.0.0.0:0"})
	url, err := s.Listen(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(url, "http://localhost:") {
		t.Fatalf("url = %q, want http://localhost:PORT/", url)
	}
	_ = s.ln.Close()
}
