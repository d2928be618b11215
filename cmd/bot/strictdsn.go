package main

import (
	"fmt"
	"net/url"
	"strings"
)

// strictURL refuses a store URL (MARLOWE_DATABASE_URL, MARLOWE_REDIS_URL)
// whose userinfo is not unambiguous: an unescaped @ / ? or # in the
// password, or a broken percent-escape. URL parsers end the authority at
// the first / ? or #, so redis://secret#x@host connects to a host named
// "secret" (printed in errors and sent to DNS), and redis://:pa/ss@host
// makes a host and port of the password's first half. Such a URL is
// refused before anything parses, prints or resolves it; the error names
// it with everything before its last @ replaced, and says how to write
// the password. A value that is not scheme://… (a libpq key=value DSN) is
// left to its own parser.
func strictURL(name, raw string) error {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok || scheme == "" || strings.ContainsAny(scheme, " =") {
		return nil
	}
	at := strings.LastIndexByte(rest, '@')
	if at < 0 {
		return nil // no userinfo, so no password in the authority
	}
	userinfo := rest[:at]
	bad := strings.ContainsAny(userinfo, "@/?#") || strings.ContainsAny(userinfo, " \t\r\n")
	if !bad {
		if _, err := url.PathUnescape(userinfo); err != nil {
			bad = true
		} else if _, err := url.Parse(scheme + "://" + userinfo + "@h"); err != nil {
			bad = true
		}
	}
	if !bad {
		return nil
	}
	return fmt.Errorf("%s %s has reserved characters in its user and password: percent-encode the password "+
		"(@ as %%40, / as %%2F, ? as %%3F, # as %%23, %% as %%25, a space as %%20), e.g. %s://user:p%%40ss%%23word@host",
		name, redactDSN(scheme+"://"+redacted+"@"+rest[at+1:]), scheme)
}
