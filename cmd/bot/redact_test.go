package main

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/marlowe-bot/marlowe/internal/testpg"
)

func TestRedactDSN(t *testing.T) {
	cases := []struct{ in, want string }{
		{"postgres://marlowe:s3cret@db:5432/marlowe?sslmode=disable", "postgres://marlowe:xxxxx@db:5432/marlowe?sslmode=disable"},
		{"postgresql://u:p%40ss%2Fw@h1:5432,h2:5433/db", "postgresql://u:xxxxx@h1:5432,h2:5433/db"},
		{"postgres://u:p@ss@host/db", "postgres://u:xxxxx@host/db"}, // unescaped @ in the password
		{"postgres://marlowe@db/marlowe", "postgres://marlowe@db/marlowe"},
		{"postgres://db/marlowe?user=marlowe&password=s3cret&sslmode=require", "postgres://db/marlowe?user=marlowe&password=xxxxx&sslmode=require"},
		{"postgres://db/m?sslpassword=keypass&PASSWORD=s3cret", "postgres://db/m?sslpassword=xxxxx&PASSWORD=xxxxx"},
		{"host=db user=marlowe password=s3cret dbname=marlowe", "host=db user=marlowe password=xxxxx dbname=marlowe"},
		{"host=db password = s3cret dbname=m", "host=db password = xxxxx dbname=m"},
		{"password=s3cret host=db", "password=xxxxx host=db"},
		{`host=db password='s3 cr\'et' dbname=m`, "host=db password=xxxxx dbname=m"},
		{"host=db sslpassword=keypass PassWord=s3cret", "host=db sslpassword=xxxxx PassWord=xxxxx"},
		{"redis://:s3cret@redis:6379/0", "redis://:xxxxx@redis:6379/0"},
		{"redis://default:s3cret@redis:6379/0", "redis://default:xxxxx@redis:6379/0"},
		{"rediss://s3cret@redis:6380", "rediss://xxxxx@redis:6380"},
		{"redis://redis:6379/0?password=s3cret", "redis://redis:6379/0?password=xxxxx"},
		{"redis://redis:6379/0", "redis://redis:6379/0"},
		// Passwords holding / ? # unescaped: the URL does not parse (or
		// parses with the password's tail as its path), so everything up to
		// the token's last @ goes.
		{"redis://:s3cret/x@redis:6379/0", "redis://xxxxx@redis:6379/0"},
		{"redis://:s3c?ret@redis:6379/0", "redis://xxxxx@redis:6379/0"},
		{"redis://:s3c#ret@redis:6379/0", "redis://xxxxx@redis:6379/0"},
		{"rediss://default:a/b?c#s3cret@redis:6380/1", "rediss://xxxxx@redis:6380/1"},
		{"redis://u:12/s3cret@redis:6379/0", "redis://xxxxx@redis:6379/0"}, // parses: host u, port 12, path /s3cret@redis…
		{"redis://:s3c@ret@redis:6379", "redis://:xxxxx@redis:6379"},
		{"postgres://u:s3c/ret@db/m", "postgres://xxxxx@db/m"},
		{"connect to redis redis://:s3/cret@h:1: refused", "connect to redis redis://xxxxx@h:1: refused"},
		{`open: "redis://:s3#cret@h:1/0"`, `open: "redis://xxxxx@h:1/0"`},
		{"/data/marlowe.db", "/data/marlowe.db"},
		{`open postgres: cannot parse "postgres://u:s3cret@h/db": bad port`, `open postgres: cannot parse "postgres://u:xxxxx@h/db": bad port`},
		{"connect to redis redis://:s3cret@h:1: refused; retry with host=h password=s3cret", "connect to redis redis://:xxxxx@h:1: refused; retry with host=h password=xxxxx"},
	}
	for _, c := range cases {
		got := redactDSN(c.in)
		if got != c.want {
			t.Errorf("redactDSN(%q)\n = %q\nwant %q", c.in, got, c.want)
		}
		if strings.Contains(got, "s3cret") || strings.Contains(got, "s3") || strings.Contains(got, "cret") || strings.Contains(got, "keypass") || strings.Contains(got, "p%40ss") {
			t.Errorf("redactDSN(%q) leaks a secret: %q", c.in, got)
		}
	}
}

// TestServeStartupLogHasNoPassword runs serve on Postgres and Redis with
// passwords in every DSN form (the local servers trust any password) and
// checks the start-up log names the stores without them.
func TestServeStartupLogHasNoPassword(t *testing.T) {
	dbURL := testpg.New(t)
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	kv := fmt.Sprintf("host=%s port=%s user=%s dbname=%s sslmode=disable password='pg kv s3cret'",
		u.Hostname(), u.Port(), u.User.Username(), strings.TrimPrefix(u.Path, "/"))
	withPW := *u
	withPW.User = url.UserPassword(u.User.Username(), "pgURLs3cret")
	query := dbURL + "&password=pgQuerys3cret"
	redisURL := testRedisURL(t)
	ru, err := url.Parse(redisURL)
	if err != nil {
		t.Fatal(err)
	}
	ru.User = url.UserPassword("default", "redisS3cret") // the default user is nopass: any password is accepted

	for name, dsn := range map[string]string{"key=value": kv, "url": withPW.String(), "query": query} {
		t.Run(name, func(t *testing.T) {
			vars := map[string]string{
				"MARLOWE_DATA_DIR":     t.TempDir(),
				"MARLOWE_HTTP_ADDR":    "127.0.0.1:0",
				"MARLOWE_SANDBOX_ADDR": "127.0.0.1:0",
				"MARLOWE_DATABASE_URL": dsn,
				"MARLOWE_REDIS_URL":    ru.String(),
				"MARLOWE_LOG_LEVEL":    "debug",
			}
			ctx, cancel := context.WithCancel(t.Context())
			logs := &syncBuffer{}
			done := make(chan error, 1)
			go func() { done <- run(ctx, []string{"serve"}, env(vars), strings.NewReader(""), io.Discard, logs) }()
			for deadline := time.Now().Add(15 * time.Second); !strings.Contains(logs.String(), "sandbox ready"); time.Sleep(20 * time.Millisecond) {
				if time.Now().After(deadline) {
					cancel()
					t.Fatalf("serve did not start (%v):\n%s", <-done, logs.String())
				}
			}
			cancel()
			if err := <-done; err != nil {
				t.Fatalf("serve: %v", err)
			}
			out := logs.String()
			for _, secret := range []string{"s3cret", "S3cret"} {
				if strings.Contains(out, secret) {
					t.Errorf("a password reached the log:\n%s", out)
				}
			}
			if !regexp.MustCompile(`msg="store ready" store="postgres [^"]*xxxxx`).MatchString(out) ||
				!regexp.MustCompile(`msg="redis ready" url=redis://default:xxxxx@`).MatchString(out) {
				t.Errorf("the stores are not named (redacted) in the start-up log:\n%s", out)
			}
		})
	}
}

// testRedisURL is MARLOWE_TEST_REDIS_URL or the local default; the test is
// skipped (failed under MARLOWE_REQUIRE_SERVICES=1) when it does not answer.
func testRedisURL(t *testing.T) string {
	t.Helper()
	raw := os.Getenv("MARLOWE_TEST_REDIS_URL")
	if raw == "" {
		raw = "redis://127.0.0.1:6379/0"
	}
	opt, err := goredis.ParseURL(raw)
	if err == nil {
		c := goredis.NewClient(opt)
		err = c.Ping(t.Context()).Err()
		_ = c.Close()
	}
	if err != nil {
		if os.Getenv("MARLOWE_REQUIRE_SERVICES") == "1" {
			t.Fatalf("redis at %s: %v", redactDSN(raw), err)
		}
		t.Skipf("redis unreachable at %s: %v", redactDSN(raw), err)
	}
	return raw
}

// Attack (a Redis password leaks): start-up and doctor, given a Redis URL
// whose password holds / ? or #, say the URL cannot be read and name it
// redacted; no piece of the password reaches the terminal (the URL
// parser's own error quotes pieces of it: `invalid port ":s3" after host`).
func TestRedisPasswordWithURLSyntaxNeverPrinted(t *testing.T) {
	for _, raw := range []string{"redis://:s3/cret@127.0.0.1:1/0", "redis://:s3?cret@127.0.0.1:1/0", "redis://:s3#cret@127.0.0.1:1/0",
		"redis://default:s3/c?r#et@127.0.0.1:1/0", "redis://u:12/s3cret@127.0.0.1:1/0"} {
		vars := map[string]string{"MARLOWE_DATA_DIR": t.TempDir(), "MARLOWE_REDIS_URL": raw}
		var out, errOut strings.Builder
		err := run(t.Context(), []string{"doctor"}, env(vars), strings.NewReader(""), &out, &errOut)
		doc := out.String() + errOut.String()
		if err != nil {
			doc += redactDSN(err.Error()) // what main prints
		}
		if !strings.Contains(doc, "✗ redis: MARLOWE_REDIS_URL redis://xxxxx@127.0.0.1:1/0 has reserved characters") {
			t.Errorf("doctor with %q:\n%s", raw, doc)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		vars["MARLOWE_DATA_DIR"] = t.TempDir()
		out.Reset()
		errOut.Reset()
		err = run(ctx, []string{"serve"}, env(vars), strings.NewReader(""), &out, &errOut)
		cancel()
		if err == nil {
			t.Fatalf("serve started with %q", raw)
		}
		started := out.String() + errOut.String() + redactDSN(err.Error())
		if !strings.Contains(started, "MARLOWE_REDIS_URL redis://xxxxx@127.0.0.1:1/0 has reserved characters") {
			t.Errorf("serve with %q: %v\n%s", raw, err, started)
		}
		for _, piece := range []string{"s3", "cret", "c?r", "/c"} {
			if strings.Contains(doc, piece) || strings.Contains(started, piece) {
				t.Errorf("%q: a piece of the password (%q) is printed:\ndoctor: %s\nserve: %s", raw, piece, doc, started)
			}
		}
	}
}
