// Package testredis connects tests to a real Redis: the one at
// MARLOWE_TEST_REDIS_URL, or redis://127.0.0.1:6379/0. When Redis is
// unreachable the test is skipped, loudly, unless MARLOWE_REQUIRE_SERVICES=1,
// in which case it fails.
package testredis

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// DefaultURL is used when MARLOWE_TEST_REDIS_URL is unset.
const DefaultURL = "redis://127.0.0.1:6379/0"

// URL returns the Redis URL tests use.
func URL() string {
	if u := os.Getenv("MARLOWE_TEST_REDIS_URL"); u != "" {
		return u
	}
	return DefaultURL
}

// redacted hides a password in u for messages.
func redacted(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "(unparsable URL)"
	}
	return p.Redacted()
}

// Client returns a client to the test Redis, closed when tb ends, with a
// pool sized for poolSize concurrent callers (0: go-redis default). It
// skips tb (or fails it under MARLOWE_REQUIRE_SERVICES=1) when Redis is
// unreachable.
func Client(tb testing.TB, poolSize int) *goredis.Client {
	tb.Helper()
	raw := URL()
	opt, err := goredis.ParseURL(raw)
	if err != nil {
		tb.Fatalf("testredis: parse %s: %v", redacted(raw), err)
	}
	if poolSize > 0 {
		opt.PoolSize = poolSize
	}
	// Probe once, without retries, so an absent Redis skips fast.
	probeOpt := *opt
	probeOpt.MaxRetries = -1
	probeOpt.PoolSize = 1
	probe := goredis.NewClient(&probeOpt)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err = probe.Ping(ctx).Err()
	_ = probe.Close()
	if err != nil {
		msg := fmt.Sprintf("testredis: Redis unreachable at %s: %v", redacted(raw), err)
		if os.Getenv("MARLOWE_REQUIRE_SERVICES") == "1" {
			tb.Fatalf("%s (MARLOWE_REQUIRE_SERVICES=1)", msg)
		}
		// Loud: visible without -v too.
		fmt.Fprintf(os.Stderr, "SKIP %s: %s; set MARLOWE_TEST_REDIS_URL to a reachable server, or MARLOWE_REQUIRE_SERVICES=1 to make this a failure\n", tb.Name(), msg)
		tb.Skipf("%s; set MARLOWE_TEST_REDIS_URL to a reachable server, or MARLOWE_REQUIRE_SERVICES=1 to make this a failure", msg)
	}
	c := goredis.NewClient(opt)
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// Prefix returns a random key prefix for one test and deletes every key
// under it when tb ends.
func Prefix(tb testing.TB, c *goredis.Client) string {
	tb.Helper()
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		tb.Fatalf("testredis: random prefix: %v", err)
	}
	prefix := "marlowe-test:" + hex.EncodeToString(b[:]) + ":"
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := DeletePrefix(ctx, c, prefix); err != nil {
			tb.Errorf("testredis: clean up keys %s*: %v", prefix, err)
		}
	})
	return prefix
}

// DeletePrefix deletes every key that starts with prefix.
func DeletePrefix(ctx context.Context, c *goredis.Client, prefix string) error {
	iter := c.Scan(ctx, 0, escapeGlob(prefix)+"*", 500).Iterator()
	var batch []string
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		err := c.Unlink(ctx, batch...).Err()
		batch = batch[:0]
		return err
	}
	for iter.Next(ctx) {
		batch = append(batch, iter.Val())
		if len(batch) == 500 {
			if err := flush(); err != nil {
				return fmt.Errorf("delete keys %s*: %w", prefix, err)
			}
		}
	}
	if err := iter.Err(); err != nil {
		return fmt.Errorf("scan keys %s*: %w", prefix, err)
	}
	if err := flush(); err != nil {
		return fmt.Errorf("delete keys %s*: %w", prefix, err)
	}
	return nil
}

// escapeGlob escapes Redis glob metacharacters.
func escapeGlob(s string) string {
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '*', '?', '[', ']', '\\':
			out = append(out, '\\')
		}
		out = append(out, s[i])
	}
	return string(out)
}
