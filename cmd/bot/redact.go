package main

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"
)

// redacted replaces every secret redactDSN finds.
const redacted = "xxxxx"

var (
	// scheme://… up to the end of the token (space, quote, angle bracket):
	// a password may hold / ? # unescaped, so the authority is not trusted
	// to end at the first of them (redactURL).
	reURL = regexp.MustCompile("([A-Za-z][A-Za-z0-9+.-]*)://([^\\s\"'<>`]*)")
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
	s = reURL.ReplaceAllStringFunc(s, redactURL)
	s = reQuerySecret.ReplaceAllString(s, "${1}"+redacted)
	return reKVSecret.ReplaceAllString(s, "${1}${2}${3}"+redacted)
}

// redactURL hides the password of one URL token. A URL that parses with
// its userinfo as the only part holding '@' keeps its user name
// (postgres://u:xxxxx@h, redis://:xxxxx@h; redis://secret@h, which
// Redis clients read as a password, becomes redis://xxxxx@h). Otherwise
// (it does not parse, or an '@' lies past the parsed host, as when the
// password holds an unescaped / ? or #) everything from the scheme up to
// the token's last '@' is removed: redis://xxxxx@host:6379/0.
func redactURL(tok string) string {
	scheme, rest, _ := strings.Cut(tok, "://")
	at := strings.LastIndexByte(rest, '@')
	if at < 0 {
		return tok
	}
	host := rest[at+1:]
	u, err := url.Parse(tok)
	if err != nil || u.User == nil || strings.Contains(u.Host+u.EscapedPath()+u.RawQuery+u.Fragment, "@") {
		return scheme + "://" + redacted + "@" + host
	}
	if user, _, ok := strings.Cut(rest[:at], ":"); ok {
		return scheme + "://" + user + ":" + redacted + "@" + host
	}
	if strings.HasPrefix(strings.ToLower(scheme), "redis") {
		return scheme + "://" + redacted + "@" + host
	}
	return tok
}

// redisURLError says MARLOWE_REDIS_URL cannot be read, naming it redacted.
// The parser's own error is not shown: it quotes pieces of the URL cut at
// the first / ? or # (`invalid port ":pa" after host`, `invalid URL path:
// /ss@h`), which are pieces of a password holding one.
func redisURLError(raw string) error {
	return fmt.Errorf("MARLOWE_REDIS_URL %s is not a Redis URL (redis://[user:password@]host:port/db; "+
		"a password holding / ? or # must be percent-encoded: %%2F %%3F %%23)", redactDSN(raw))
}
