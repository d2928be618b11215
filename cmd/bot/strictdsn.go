package main

import (
	"fmt"
	"net/url"
	"strings"
)

// strictURL refuses a store URL (MARLOWE_DATABASE_URL, MARLOWE_REDIS_URL)
// that cannot be read one way only: an unescaped @ / ? or # in the
// password, a broken percent-escape or whitespace in the userinfo, an @
// past where the host ends, or a # anywhere (a store URL has no
// fragment). URL parsers end the authority at the first / ? or #, so
// redis://secret#x@host connects to a host named "secret" (printed in
// errors and sent to DNS), redis://:pa/ss@host makes a host and port of
// the password's first half, and ?password=se#cret keeps "cret" as a
// fragment that is printed. Such a URL is refused before anything parses,
// prints or resolves it. The error names it with its userinfo replaced
// (and, where the host cannot be told from a password's tail, nothing
// after it), and says how to write the password. A value that is not
// scheme://… (a libpq key=value DSN) is left to its own parser.
func strictURL(name, raw string) error {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok || scheme == "" || strings.ContainsAny(scheme, " =") {
		return nil
	}
	authEnd := strings.IndexAny(rest, "/?#")
	if authEnd < 0 {
		authEnd = len(rest)
	}
	at := strings.LastIndexByte(rest, '@')
	afterAt := func() string { return redactDSN(scheme + "://" + redacted + "@" + rest[at+1:]) }
	shown := ""
	switch {
	case at >= authEnd:
		// An @ past the host's end: a password holding / ? or #, or an @
		// in the path or query. What follows the @ is the host only when
		// nothing before it reads as a query (a password=… value).
		shown = scheme + "://" + redacted + "@…"
		if !strings.ContainsAny(rest[:at], "=&") {
			shown = afterAt()
		}
	case at >= 0:
		userinfo := rest[:at]
		if strings.ContainsAny(userinfo, "@ \t\r\n") {
			shown = afterAt()
		} else if _, err := url.PathUnescape(userinfo); err != nil {
			shown = afterAt()
		} else if _, err := url.Parse(scheme + "://" + userinfo + "@h"); err != nil {
			shown = afterAt()
		}
	}
	if shown == "" && strings.Contains(rest, "#") {
		shown = redactDSN(scheme + "://" + rest)
	}
	if shown == "" {
		return nil
	}
	if i := strings.IndexByte(shown, '#'); i >= 0 {
		shown = shown[:i] + "#…"
	}
	return fmt.Errorf("%s %s has reserved characters in its user and password (or a # or @ where a URL has none): percent-encode the password "+
		"(@ as %%40, / as %%2F, ? as %%3F, # as %%23, %% as %%25, a space as %%20), e.g. %s://user:p%%40ss%%23word@host",
		name, shown, scheme)
}
