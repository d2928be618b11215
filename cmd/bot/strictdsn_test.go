package main

import (
	"context"
	"strings"
	"testing"
	"time"
)

// Attack (a store password leaks or is resolved): a password holding an
// unescaped # ? / or @, in MARLOWE_REDIS_URL (password-only and user
// forms) and MARLOWE_DATABASE_URL, given to serve and doctor. Each refuses
// the URL before parsing it, names it with the userinfo replaced, says to
// percent-encode the password, and prints no 4-character piece of the
// password anywhere: stdout, stderr (the log) or the returned error (what
// main prints). On the old code redis://<pw>#…@host connected to a host
// named after the password's first half and printed it.
func TestStoreURLPasswordWithReservedCharsRefused(t *testing.T) {
	for c, char := range map[string]string{"#": "hash", "?": "question", "/": "slash", "@": "at"} {
		pw := "Zq8wPx4" + c + "Lm7kRt2v"
		for _, tc := range []struct{ name, key, url, shown string }{
			{"redis password only", "MARLOWE_REDIS_URL", "redis://" + pw + "@127.0.0.1:1/0", "redis://xxxxx@127.0.0.1:1/0"},
			{"redis user", "MARLOWE_REDIS_URL", "redis://default:" + pw + "@127.0.0.1:1/0", "redis://xxxxx@127.0.0.1:1/0"},
			{"rediss user", "MARLOWE_REDIS_URL", "rediss://app:" + pw + "@127.0.0.1:1", "rediss://xxxxx@127.0.0.1:1"},
			{"postgres", "MARLOWE_DATABASE_URL", "postgres://marlowe:" + pw + "@127.0.0.1:1/marlowe?sslmode=disable", "postgres://xxxxx@127.0.0.1:1/marlowe?sslmode=disable"},
			{"postgresql", "MARLOWE_DATABASE_URL", "postgresql://marlowe:" + pw + "@127.0.0.1:1/m", "postgresql://xxxxx@127.0.0.1:1/m"},
			// The password in the query: a # cuts it into a fragment, an @
			// makes its tail look like a host.
			{"redis query", "MARLOWE_REDIS_URL", "redis://127.0.0.1:1/0?password=" + pw, queryShown("redis://127.0.0.1:1/0?password=xxxxx", c)},
			{"postgres query", "MARLOWE_DATABASE_URL", "postgres://127.0.0.1:1/m?sslmode=disable&password=" + pw, queryShown("postgres://127.0.0.1:1/m?sslmode=disable&password=xxxxx", c)},
		} {
			if tc.shown == "" {
				continue // this character is unambiguous there
			}
			t.Run(char+" "+tc.name, func(t *testing.T) {
				for _, cmd := range []string{"doctor", "serve"} {
					vars := map[string]string{
						"MARLOWE_DATA_DIR":     t.TempDir(),
						"MARLOWE_HTTP_ADDR":    "127.0.0.1:0",
						"MARLOWE_SANDBOX_ADDR": "127.0.0.1:0",
						"MARLOWE_LOG_LEVEL":    "debug",
						tc.key:                 tc.url,
					}
					ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
					var out, errOut syncBuffer
					err := run(ctx, []string{cmd}, env(vars), strings.NewReader(""), &out, &errOut)
					cancel()
					if err == nil {
						t.Fatalf("%s accepted %s", cmd, tc.key)
					}
					printed := out.String() + errOut.String() + redactDSN(err.Error())
					if !strings.Contains(printed, tc.key+" "+tc.shown+" has reserved characters") || !strings.Contains(printed, "percent-encode the password") {
						t.Errorf("%s does not refuse the URL by name, redacted, saying to percent-encode:\n%s", cmd, printed)
					}
					for i := 0; i+4 <= len(pw); i++ {
						if piece := pw[i : i+4]; strings.Contains(printed, piece) {
							t.Errorf("%s prints a piece of the password (%q):\n%s", cmd, piece, printed)
							break
						}
					}
				}
			})
		}
	}
}

// queryShown is how a URL with the password in its query is named when
// refused for the password's character c: "" when c is unambiguous there.
func queryShown(redactedURL, c string) string {
	scheme, _, _ := strings.Cut(redactedURL, "://")
	switch c {
	case "#":
		return redactedURL + "#…"
	case "@":
		return scheme + "://xxxxx@…"
	}
	return ""
}

// A well-formed URL, the password percent-encoded, is not refused.
func TestStrictURLAcceptsEncodedPasswords(t *testing.T) {
	for _, raw := range []string{
		"redis://:Zq8%23Lm7%3Fk%2Fv%40w@127.0.0.1:6379/0",
		"redis://127.0.0.1:6379/0",
		"postgres://marlowe:p%40ss%2Fw@db:5432/marlowe?sslmode=disable",
		"postgres://db/marlowe?user=marlowe&password=s3cret",
		"host=db user=marlowe password=a#b@c dbname=m",
	} {
		if err := strictURL("X", raw); err != nil {
			t.Errorf("strictURL(%q): %v", raw, err)
		}
	}
}
