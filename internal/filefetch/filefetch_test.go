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
	f := Fetcher{Hosts: []string{u.Host}}
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
