package discordfake

import (
	"crypto/sha1"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Discord rate-limits each route on its own: every response carries the
// route's bucket (X-RateLimit-Bucket, the same hash for every channel's
// instance of a route) and what is left of it (X-RateLimit-Limit,
// -Remaining, -Reset-After), per major parameter (the channel). discordgo
// tracks these per route and waits once one is spent. The fake sends them
// on every answer. With Config.RouteBuckets it also keeps to them as
// Discord does: 5 messages per 5 s per channel, one reaction per 250 ms
// per channel, 50 a second for anything else; a request over its bucket
// is answered 429.

// routeLimit is one route's bucket.
type routeLimit struct {
	hash string
	n    int
	per  time.Duration
}

// bucketState is one bucket instance (route and major parameter). Its
// window ends at end; every answer's Reset-After is end less the instant
// the request was counted at, rounded up to the millisecond, so a client
// that waits what the headers say is never early.
type bucketState struct {
	end  time.Time
	used int
}

// routeOf names path's route and its major parameter and gives its limit.
func (s *Server) routeOf(method, path string) (key string, lim routeLimit) {
	parts := strings.Split(path, "/")
	major, kind := "", parts[0]
	if len(parts) > 1 && (parts[0] == "channels" || parts[0] == "guilds" || parts[0] == "webhooks") {
		major = parts[1]
		if len(parts) > 2 {
			kind = parts[0] + "/" + parts[2]
		}
		if strings.Contains(path, "/reactions/") {
			kind = parts[0] + "/reactions"
		}
	}
	route := method + " " + kind
	sum := sha1.Sum([]byte(route))
	lim = routeLimit{hash: hex.EncodeToString(sum[:8]), n: 50, per: time.Second}
	if !s.cfg.RouteBuckets {
		lim.n = 1000 // headers only: never the limit in tests
	}
	switch {
	case !s.cfg.RouteBuckets:
	case route == "POST channels/messages":
		lim.n, lim.per = 5, 5*time.Second
	case route == "PUT channels/reactions":
		lim.n, lim.per = 1, 250*time.Millisecond
	}
	return route + " " + major, lim
}

// takeBucket counts one request against its bucket and sets the headers;
// false when the bucket was spent (the answer is then a 429).
func (s *Server) takeBucket(h http.Header, method, path string) (ok bool, retry time.Duration) {
	key, lim := s.routeOf(method, path)
	s.mu.Lock()
	// The instant is taken under the lock, so buckets see requests in the
	// order they count them.
	now := time.Now()
	if s.buckets == nil {
		s.buckets = map[string]*bucketState{}
	}
	b := s.buckets[key]
	if b == nil || !now.Before(b.end) {
		b = &bucketState{end: now.Add(lim.per)}
		s.buckets[key] = b
	}
	reset := b.end.Sub(now)
	ok = b.used < lim.n
	if ok {
		b.used++
	}
	remaining := lim.n - b.used
	s.mu.Unlock()
	h.Set("X-RateLimit-Bucket", lim.hash)
	h.Set("X-RateLimit-Limit", strconv.Itoa(lim.n))
	h.Set("X-RateLimit-Remaining", strconv.Itoa(remaining))
	h.Set("X-RateLimit-Reset-After", resetAfter(reset))
	return ok, reset
}

// resetAfter writes d in seconds to the millisecond, rounded up: a
// header that rounded down would name an instant before the window ends.
func resetAfter(d time.Duration) string {
	ms := (d + time.Millisecond - 1) / time.Millisecond
	return strconv.FormatFloat(float64(ms)/1000, 'f', 3, 64)
}
