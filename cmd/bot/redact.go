package main

import (
	"regexp"
	"strings"
)

// redacted replaces every secret redactDSN finds.
const redacted = "xxxxx"

var (
	// scheme://userinfo@ — the authority runs to the first / ? # or space;
	// the greedy class then backs off to its last '@', as URL parsers do.
	reUserinfo = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.-]*)://([^/?#\s]*)@`)
	// ?password=… and &sslpassword=… in a URL's query.
	reQuerySecret = regexp.MustCompile(`(?i)([?&;](?:password|sslpassword|passwd|pass|pwd|secret|token|auth)=)[^&#\s]*`)
	// password=… in a libpq key=value string, quoted or not.
	reKVSecret = regexp.MustCompile(`(?i)(^|[\s,;(])((?:ssl)?password|passwd|pwd)(\s*=\s*)('(?:\\.|[^'\\])*'?|[^\s,;)]*)`)
)

// redactDSN hides every password in a connection string — a URL
// (postgres://u:p@h, redis://:p@h, rediss://p@h, ?password=p,
// ?sslpassword=p) or a libpq key=value string (password=p, password='p q')
// — and in any text that embeds one, such as an error message. It is the
// one way a DSN reaches a log or the terminal.
func redactDSN(s string) string {
	s = reUserinfo.ReplaceAllStringFunc(s, func(m string) string {
		sub := reUserinfo.FindStringSubmatch(m)
		scheme, info := sub[1], sub[2]
		if user, _, ok := strings.Cut(info, ":"); ok {
			return scheme + "://" + user + ":" + redacted + "@"
		}
		if strings.HasPrefix(strings.ToLower(scheme), "redis") {
			// redis://secret@host: many clients read a lone userinfo as
			// the password.
			return scheme + "://" + redacted + "@"
		}
		return m
	})
	s = reQuerySecret.ReplaceAllString(s, "${1}"+redacted)
	return reKVSecret.ReplaceAllString(s, "${1}${2}${3}"+redacted)
}
