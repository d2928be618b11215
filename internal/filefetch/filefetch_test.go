package filefetch

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/internal/egress"
)

// A body with no Content-Length (chunked) is cut off as soon as it passes
// the cap, and a redirect to a host off the list is not followed.
func TestFetcherCapsStreamsAndStaysOnItsHosts(t *testing.T) {
	big := bytes.Repeat([]byte("x"), 10_000)
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("secret")) }))
	defer other.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/chunked":
			w.(http.Flusher).Flush() // no Content-Length: chunked
			for i := 0; i < 10; i++ {
				_, _ = w.Write(big[:1000])
			}
		case "/away":
			http.Redirect(w, r, other.URL+"/x", http.StatusFound)
		case "/empty":
		}
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	f := Fetcher{Hosts: []string{u.Host}, Egress: egress.NewClient(egress.AllowLoopbackForTests()).Transport}
	ctx := context.Background()
	if _, err := f.Get(ctx, srv.URL+"/chunked", nil, 5000); !errors.Is(err, core.ErrAttachmentTooLarge) {
		t.Errorf("chunked past the cap: %v", err)
	}
	if b, err := f.Get(ctx, srv.URL+"/chunked", nil, 10_000); err != nil || len(b) != 10_000 {
		t.Errorf("chunked at the cap: %v (%d bytes)", err, len(b))
	}
	if _, err := f.Get(ctx, srv.URL+"/away", nil, 5000); !errors.Is(err, core.ErrAttachmentHost) {
		t.Errorf("redirect off the list: %v", err)
	}
	if _, err := f.Get(ctx, other.URL+"/x", nil, 5000); !errors.Is(err, core.ErrAttachmentHost) {
		t.Errorf("host off the list: %v", err)
	}
	if b, err := f.Get(ctx, srv.URL+"/empty", nil, 5000); err != nil || len(b) != 0 {
		t.Errorf("zero-byte file: %v %d", err, len(b))
	}
}

// The platform's own hosts are reached through the egress client: a
// platform host name that resolves inside (here "localhost", as a
// poisoned or split-horizon DNS answer for files.slack.com would) is
// refused at connect time, directly and as a redirect's target. Only a
// host the operator configured (Local: a fake, a self-hosted Bot API
// server) goes through the adapter's own client and may be loopback.
func TestPlatformHostsGoThroughEgress(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hop" {
			http.Redirect(w, r, r.URL.Query().Get("to"), http.StatusFound)
			return
		}
		_, _ = w.Write([]byte("file body"))
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	named := "localhost:" + u.Port() // a name, resolved at connect time
	ctx := context.Background()
	tests := []struct {
		name    string
		f       Fetcher
		ref     string
		denied  bool
		wantErr bool
	}{
		{"platform host resolving to loopback", Fetcher{Hosts: []string{named}}, "http://" + named + "/f", true, true},
		{"platform address literal", Fetcher{Hosts: []string{u.Host}}, srv.URL + "/f", true, true},
		{"configured local host", Fetcher{Local: []string{named}}, "http://" + named + "/f", false, false},
		{"local host redirecting to a platform host inside", Fetcher{Hosts: []string{u.Host}, Local: []string{named}},
			"http://" + named + "/hop?to=" + url.QueryEscape(srv.URL+"/f"), true, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, err := tc.f.Get(ctx, tc.ref, nil, 1000)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, body %q; want error %v", err, b, tc.wantErr)
			}
			if tc.denied && !errors.Is(err, egress.ErrDenied) {
				t.Errorf("err = %v, want egress.ErrDenied", err)
			}
			if !tc.wantErr && string(b) != "file body" {
				t.Errorf("body %q", b)
			}
		})
	}
}
