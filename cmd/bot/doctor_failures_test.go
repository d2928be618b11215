package main

import (
	"net"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgproto3"
)

// doctorLines runs bot doctor with vars (and a fresh data dir) and returns
// the output lines whose check is name.
func doctorLines(t *testing.T, vars map[string]string, name string) []string {
	t.Helper()
	vars = with(vars, "MARLOWE_DATA_DIR", t.TempDir())
	out, _ := runBot(t, env(vars), "", "doctor")
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if strings.Contains(l, " "+name+":") && (strings.HasPrefix(l, "✗") || strings.HasPrefix(l, "!") || strings.HasPrefix(l, "✓")) {
			lines = append(lines, l)
		} else if !strings.HasPrefix(l, "✓") && !strings.HasPrefix(l, "!") && !strings.HasPrefix(l, "✗") {
			t.Errorf("a line of doctor's output is not a check: %q (in %s)", l, out)
		}
	}
	return lines
}

// refusedAddr is a local port nothing listens on.
func refusedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// fakePostgres answers every connection as a PostgreSQL server would in
// one way: "auth" asks for a password and refuses it (28P01); "notls"
// declines TLS (as a server without ssl does).
func fakePostgres(t *testing.T, mode string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				be := pgproto3.NewBackend(c, c)
				for {
					msg, err := be.ReceiveStartupMessage()
					if err != nil {
						return
					}
					switch msg.(type) {
					case *pgproto3.SSLRequest, *pgproto3.GSSEncRequest:
						if _, err := c.Write([]byte("N")); err != nil {
							return
						}
						continue
					}
					if mode == "auth" {
						be.Send(&pgproto3.AuthenticationCleartextPassword{})
						if err := be.Flush(); err != nil {
							return
						}
						if err := be.SetAuthType(pgproto3.AuthTypeCleartextPassword); err != nil {
							return
						}
						if _, err := be.Receive(); err != nil {
							return
						}
						be.Send(&pgproto3.ErrorResponse{Severity: "FATAL", Code: "28P01", Message: `password authentication failed for user "marlowe"`})
						_ = be.Flush()
					}
					return
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// TestDoctorStoreFailures: each way the store can fail is one ✗ store
// line that says which case it is, with its own fix, and no password.
func TestDoctorStoreFailures(t *testing.T) {
	pg := os.Getenv("MARLOWE_TEST_DATABASE_URL")
	if pg == "" {
		pg = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	}
	local := func(user, db string) string {
		u := strings.Replace(pg, "://postgres@", "://"+user+"@", 1)
		return strings.Replace(u, "/test?", "/"+db+"?", 1)
	}
	pgUp := func() bool {
		c, err := net.Dial("tcp", "127.0.0.1:5432")
		if err == nil {
			c.Close()
		}
		return err == nil
	}()
	for _, tc := range []struct {
		name, url    string
		needPG       bool
		detail, fix  string
		forbiddenAny []string
	}{
		{name: "not a url", url: "not a url", detail: "is not a URL", fix: "postgres://user:password@host:5432/database"},
		{name: "mysql", url: "mysql://root:hunter2@db:3306/app", detail: "is a mysql:// URL", fix: "use postgres://", forbiddenAny: []string{"hunter2"}},
		{name: "database missing", url: local("postgres", "marlowe_doctor_missing_db"), needPG: true, detail: `has no database "marlowe_doctor_missing_db"`, fix: "createdb -h 127.0.0.1 -p 5432 -U postgres marlowe_doctor_missing_db"},
		{name: "unknown role", url: local("marlowe_doctor_nobody", "test"), needPG: true, detail: `refused user "marlowe_doctor_nobody"`, fix: "user and password"},
		{name: "password refused", url: "postgres://marlowe:hunter2@" + fakePostgres(t, "auth") + "/marlowe?sslmode=disable", detail: "password authentication failed", fix: "user and password", forbiddenAny: []string{"hunter2"}},
		{name: "connection refused", url: "postgres://postgres:hunter2@" + refusedAddr(t) + "/test", detail: "(connection refused)", fix: "start PostgreSQL", forbiddenAny: []string{"hunter2"}},
		{name: "server without TLS", url: "postgres://postgres@" + fakePostgres(t, "notls") + "/test?sslmode=require", detail: "TLS with the server", fix: "sslmode"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.needPG && !pgUp {
				if os.Getenv("MARLOWE_REQUIRE_SERVICES") == "1" {
					t.Fatal("PostgreSQL at 127.0.0.1:5432 does not answer")
				}
				t.Skip("SKIP: no PostgreSQL at 127.0.0.1:5432 (MARLOWE_TEST_DATABASE_URL)")
			}
			lines := doctorLines(t, map[string]string{"MARLOWE_DATABASE_URL": tc.url}, "store")
			if len(lines) != 1 {
				t.Fatalf("%d store lines, want one: %q", len(lines), lines)
			}
			l := lines[0]
			t.Log(l)
			detail, fix, _ := strings.Cut(l, " — fix: ")
			if !strings.HasPrefix(l, "✗ store: ") || !strings.Contains(detail, tc.detail) || !strings.Contains(fix, tc.fix) {
				t.Errorf("store line %q, want detail with %q and fix with %q", l, tc.detail, tc.fix)
			}
			for _, f := range tc.forbiddenAny {
				if strings.Contains(l, f) {
					t.Errorf("store line shows %q: %q", f, l)
				}
			}
			if tc.name != "not a url" && strings.Contains(fix, "is PostgreSQL running") {
				t.Errorf("a known case got the generic fix: %q", l)
			}
		})
	}
}

// TestDoctorPlatformConfigFailures: a platform's bad configuration is one
// ✗ line pointing at that platform's guide, its prefix said once.
func TestDoctorPlatformConfigFailures(t *testing.T) {
	for _, tc := range []struct {
		name  string
		vars  map[string]string
		guide string
	}{
		{"slack", map[string]string{"SLACK_BOT_TOKEN": "not-a-token"}, "docs/slack.md"},
		{"discord", map[string]string{"DISCORD_BOT_TOKEN": "abc", "MARLOWE_DISCORD_API_URL": "notaurl"}, "docs/discord.md"},
		{"telegram", map[string]string{"TELEGRAM_BOT_TOKEN": "bad", "MARLOWE_TELEGRAM_MODE": "webhook"}, "docs/telegram.md"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lines := doctorLines(t, tc.vars, "platforms")
			if len(lines) != 1 {
				t.Fatalf("%d platform lines, want one: %q", len(lines), lines)
			}
			l := lines[0]
			t.Log(l)
			if !strings.HasPrefix(l, "✗ platforms: "+tc.name) || !strings.HasSuffix(l, "fix: "+platformGuides[tc.name]) || !strings.Contains(l, tc.guide) {
				t.Errorf("line %q, want a failure of %s ending with its guide %s", l, tc.name, tc.guide)
			}
			if strings.Count(l, tc.name+" config") > 1 || strings.Contains(l, tc.name+": "+tc.name) {
				t.Errorf("the prefix is repeated: %q", l)
			}
		})
	}
}
