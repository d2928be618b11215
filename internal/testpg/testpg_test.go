package testpg

import (
	"regexp"
	"strings"
	"testing"
)

func TestDBName(t *testing.T) {
	valid := regexp.MustCompile(`^[a-z0-9_]+$`)
	a, b := dbName("TestJournal/Tamper/Delete-Last"), dbName("TestJournal/Tamper/Delete-Last")
	if a == b {
		t.Fatalf("two databases named %s", a)
	}
	long := dbName(strings.Repeat("VeryLongTestName/", 20))
	for _, n := range []string{a, long} {
		if !valid.MatchString(n) || len(n) > 63 {
			t.Fatalf("bad database name %q (%d bytes)", n, len(n))
		}
	}
	if !strings.HasPrefix(a, "marlowe_t_testjournal_tamper_delete_last_") {
		t.Fatalf("name does not say which test made it: %s", a)
	}
}

func TestWithDatabase(t *testing.T) {
	got, err := withDatabase("postgres://u:p@h:5432/test?sslmode=disable", "x")
	if err != nil || got != "postgres://u:p@h:5432/x?sslmode=disable" {
		t.Fatalf("url form: %q %v", got, err)
	}
	got, err = withDatabase("host=h user=u dbname=test", "x")
	if err != nil || got != "host=h user=u dbname=test dbname=x" {
		t.Fatalf("keyword form: %q %v", got, err)
	}
	if r := redact("postgres://u:secret@h/test"); strings.Contains(r, "secret") {
		t.Fatalf("password shown: %s", r)
	}
}
