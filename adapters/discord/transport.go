package discord

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/bwmarrin/discordgo"
)

// rebase is the session's RoundTripper: discordgo builds every REST URL on
// its package-level EndpointAPI (https://discord.com/api/v9/), which must
// not be mutated, so requests are redirected here instead — to the
// configured base (by default https://discord.com/api/v10/).
type rebase struct {
	from string // discordgo's prefix
	to   string // the configured base, with its trailing slash
	next http.RoundTripper
	// onGlobal is told of a global 429 (X-RateLimit-Global), so every
	// channel queue waits, not only the route that hit it.
	onGlobal func(time.Duration)
}

func newRebase(base string, next http.RoundTripper) *rebase {
	if next == nil {
		// Its own pool, not http.DefaultTransport's: Run closes it on exit.
		next = http.DefaultTransport.(*http.Transport).Clone()
	}
	return &rebase{from: discordgo.EndpointAPI, to: base, next: next}
}

func (t *rebase) RoundTrip(r *http.Request) (*http.Response, error) {
	s := r.URL.String()
	if !strings.HasPrefix(s, t.from) {
		return t.next.RoundTrip(r)
	}
	rest := s[len(t.from):]
	u, err := url.Parse(t.to + rest)
	if err != nil {
		return nil, err
	}
	r2 := r.Clone(r.Context())
	r2.URL = u
	r2.Host = u.Host
	res, err := t.next.RoundTrip(r2)
	if err == nil {
		roundResetAfter(res.Header)
	}
	if err == nil && res.StatusCode == http.StatusTooManyRequests && res.Header.Get("X-RateLimit-Global") != "" && t.onGlobal != nil {
		if secs, perr := strconv.ParseFloat(res.Header.Get("Retry-After"), 64); perr == nil && secs > 0 {
			t.onGlobal(time.Duration(secs * float64(time.Second)))
		}
	}
	return res, err
}

// CloseIdleConnections lets http.Client.CloseIdleConnections reach the
// transport underneath.
func (t *rebase) CloseIdleConnections() {
	if c, ok := t.next.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// roundResetAfter adds a millisecond to X-RateLimit-Reset-After: discordgo
// reads it as a float and truncates the fraction to whole milliseconds
// (4.873 can become 4.872 s), which would send the next request on the
// route just before the bucket Discord described has reset.
func roundResetAfter(h http.Header) {
	v := h.Get("X-RateLimit-Reset-After")
	if v == "" {
		return
	}
	secs, err := strconv.ParseFloat(v, 64)
	if err != nil || secs < 0 {
		return
	}
	h.Set("X-RateLimit-Reset-After", strconv.FormatFloat(secs+0.001, 'f', 3, 64))
}
