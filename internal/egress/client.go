package egress

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"syscall"
	"time"
)

// ErrDenied is wrapped by every refusal of a special-purpose address.
var ErrDenied = errors.New("non-public address")

// MaxRedirects bounds the redirects one request follows.
const MaxRedirects = 5

type options struct {
	allowLoopback bool
	dialTimeout   time.Duration
	tls           *tls.Config // tests only: TLSForTests
}

func newOptions(opts []Option) options {
	o := options{dialTimeout: 10 * time.Second}
	for _, fn := range opts {
		fn(&o)
	}
	return o
}

// Option customises NewClient.
type Option func(*options)

// AllowLoopbackForTests lets the client reach 127.0.0.0/8 and ::1, so tests
// can fetch from an httptest server. Every other special-purpose range
// stays refused. It is an option in code on purpose: there is no setting a
// deployment could turn on by accident.
func AllowLoopbackForTests() Option {
	return func(o *options) { o.allowLoopback = true }
}

// NewClient returns the egress client: it connects only to public
// addresses (checked on the resolved address of every connection, so DNS
// answers, redirects and retries are all covered), uses no proxy (a proxy
// from HTTP_PROXY would connect on our behalf, past the check), and follows
// at most MaxRedirects redirects, only to the same host over http(s).
func NewClient(opts ...Option) *http.Client {
	o := newOptions(opts)
	return &http.Client{
		Transport: o.transport(),
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			return o.checkRedirect(req, via)
		},
	}
}

// transport is the egress transport: every connection's address checked
// at connect time, no proxy.
func (o options) transport() *http.Transport {
	dialer := &net.Dialer{
		Timeout: o.dialTimeout,
		ControlContext: func(_ context.Context, _, address string, _ syscall.RawConn) error {
			return o.check(address)
		},
	}
	return &http.Transport{
		Proxy:                 nil, // never from the environment: see NewClient
		DialContext:           dialer.DialContext,
		TLSClientConfig:       o.tls,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: 15 * time.Second,
		MaxIdleConns:          10,
		IdleConnTimeout:       30 * time.Second,
	}
}

// check refuses the address a socket is about to connect to.
func (o options) check(address string) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("refusing to connect to %q: %w (unparseable)", address, ErrDenied)
	}
	return o.checkAddr(ap.Addr())
}

func (o options) checkAddr(a netip.Addr) error {
	if o.allowLoopback && a.Unmap().IsLoopback() {
		return nil
	}
	if bad, why := Denied(a); bad {
		return fmt.Errorf("refusing to connect to %s: %w (%s)", a, ErrDenied, why)
	}
	return nil
}

// checkRedirect judges each hop before it is requested. The connect-time
// check would refuse a special-purpose address anyway; an address literal
// is refused here already, with a clear reason.
func (o options) checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= MaxRedirects {
		return errors.New("too many redirects")
	}
	if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
		return fmt.Errorf("redirected to a %q URL; only http and https are fetched", req.URL.Scheme)
	}
	host := req.URL.Hostname()
	if a, err := netip.ParseAddr(host); err == nil {
		if err := o.checkAddr(a); err != nil {
			return fmt.Errorf("redirect: %w", err)
		}
	}
	// The gate approved a host; a redirect must not move the egress elsewhere.
	if !strings.EqualFold(host, via[0].URL.Hostname()) {
		return fmt.Errorf("redirected to another host (%s); fetch that URL explicitly if it is wanted", host)
	}
	return nil
}
