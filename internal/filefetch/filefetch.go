// Package filefetch downloads a platform-hosted file for an adapter:
// only from the hosts the adapter names, streamed to a size cap, within a
// timeout. The platform's own public hosts are reached through the vetted
// egress transport (internal/egress: a direct connection to public
// addresses only, checked at connect time; the composition root passes
// egress.NewPlatformTransport, which goes through the operator's proxy
// when one is configured, and this package's host checks are what keeps
// that proxy to the platform's names); only a host the operator
// configured (a local fake, a self-hosted Telegram Bot API server) goes
// through the adapter's own client. It is plumbing shared by the adapters'
// core.AttachmentFetcher implementations and imports nothing of the module
// but core and internal/egress.
package filefetch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/internal/egress"
)

// DefaultTimeout bounds one download when the caller gives none.
const DefaultTimeout = 60 * time.Second

// Fetcher downloads files from an allow-list of hosts.
type Fetcher struct {
	// Hosts are the platform's own public host[:port]s, compared
	// case-insensitively: fetched through Egress.
	Hosts []string
	// Local are the host[:port]s the operator configured in place of the
	// platform's (its API URL setting): fetched through Client, which may
	// reach any address, as the adapter's API calls do.
	Local []string
	// Egress does the requests to Hosts. nil: a fresh egress.NewClient()'s
	// transport, with no proxy (an adapter keeps one, so connections are
	// reused; cmd/bot gives it egress.NewPlatformTransport).
	Egress http.RoundTripper
	// Client does the requests to Local hosts. nil: http.DefaultTransport.
	Client *http.Client
	// Timeout bounds one download (0: DefaultTimeout).
	Timeout time.Duration
}

// NewEgress is the transport for Fetcher.Egress: egress.NewClient's.
func NewEgress() http.RoundTripper { return egress.NewClient().Transport }

// route sends each request (and each redirect hop) to the transport for
// its host: Local hosts through the adapter's, every other through egress.
type route struct {
	f             *Fetcher
	local, public http.RoundTripper
}

func (r route) RoundTrip(req *http.Request) (*http.Response, error) {
	if inHosts(req.URL, r.f.Local) {
		return r.local.RoundTrip(req)
	}
	return r.public.RoundTrip(req)
}

// Allowed parses ref and checks that it is an http(s) URL on one of the
// allowed hosts.
func (f *Fetcher) Allowed(ref string) (*url.URL, error) {
	u, err := url.Parse(ref)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil {
		return nil, fmt.Errorf("%w: not an http(s) URL", core.ErrAttachmentHost)
	}
	if !f.hostOK(u) {
		return nil, fmt.Errorf("%w: %s", core.ErrAttachmentHost, u.Host)
	}
	return u, nil
}

func (f *Fetcher) hostOK(u *url.URL) bool {
	return inHosts(u, f.Hosts) || inHosts(u, f.Local)
}

func inHosts(u *url.URL, hosts []string) bool {
	for _, h := range hosts {
		if h != "" && (strings.EqualFold(u.Host, h) || strings.EqualFold(u.Hostname(), h)) {
			return true
		}
	}
	return false
}

// Get downloads ref with the given header (the platform's authentication),
// returning at most max bytes: a larger file is core.ErrAttachmentTooLarge,
// found from Content-Length before reading, or from the stream once it
// passes max, so memory never holds more than max+1 bytes.
func (f *Fetcher) Get(ctx context.Context, ref string, header http.Header, max int64) ([]byte, error) {
	u, err := f.Allowed(ref)
	if err != nil {
		return nil, err
	}
	timeout := f.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("download %s: %w", u.Host, err)
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	local := http.DefaultTransport
	if f.Client != nil && f.Client.Transport != nil {
		local = f.Client.Transport
	}
	public := f.Egress
	if public == nil {
		public = NewEgress()
	}
	// The adapter's client may carry a short timeout meant for API calls;
	// a download is bounded by Timeout above instead.
	client := http.Client{Transport: route{f: f, local: local, public: public}}
	client.CheckRedirect = func(r *http.Request, via []*http.Request) error {
		if len(via) >= 5 {
			return errors.New("too many redirects")
		}
		if !f.hostOK(r.URL) {
			return fmt.Errorf("%w: redirected to %s", core.ErrAttachmentHost, r.URL.Host)
		}
		return nil
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("download from %s: %w", u.Host, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("download from %s: HTTP %d", u.Host, resp.StatusCode)
	}
	if resp.ContentLength > max {
		return nil, fmt.Errorf("download from %s: %d bytes: %w", u.Host, resp.ContentLength, core.ErrAttachmentTooLarge)
	}
	return ReadCapped(resp.Body, resp.ContentLength, max)
}

// ReadCapped reads r to its end, at most max bytes; hint, when positive,
// sizes the buffer once.
func ReadCapped(r io.Reader, hint, max int64) ([]byte, error) {
	size := int64(512)
	if hint > 0 && hint <= max {
		size = hint + 1
	}
	buf := make([]byte, 0, size)
	lr := io.LimitReader(r, max+1)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := lr.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > max {
			return nil, fmt.Errorf("past %d bytes: %w", max, core.ErrAttachmentTooLarge)
		}
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read: %w", err)
		}
	}
}
