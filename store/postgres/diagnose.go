package postgres

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"
)

// Failure is one kind of store failure bot doctor tells apart.
type Failure string

const (
	FailNotURL      Failure = "not a URL"
	FailNotPostgres Failure = "not postgres://"
	FailNoDatabase  Failure = "database missing"
	FailAuth        Failure = "authentication failed"
	FailRefused     Failure = "connection refused"
	FailTLS         Failure = "TLS"
	FailOther       Failure = "other"
)

// Diagnosis is a store failure in one line, with its fix.
type Diagnosis struct {
	Failure Failure
	Detail  string // one line; never the password
	Fix     string
}

// CheckURL says whether dsn is a postgres:// (or postgresql://) URL,
// before anything connects: a DSN in another form, or another database's
// URL, is told as such rather than as a connection failure.
func CheckURL(dsn string) *Diagnosis {
	u, err := url.Parse(dsn)
	if err != nil || u.Scheme == "" {
		if _, perr := pgconn.ParseConfig(dsn); perr == nil && strings.Contains(dsn, "=") {
			return nil // a keyword/value DSN (host=… dbname=…), which pgx takes too
		}
		return &Diagnosis{Failure: FailNotURL, Detail: "MARLOWE_DATABASE_URL is not a URL",
			Fix: "write it as postgres://user:password@host:5432/database?sslmode=disable"}
	}
	if s := strings.ToLower(u.Scheme); s != "postgres" && s != "postgresql" {
		return &Diagnosis{Failure: FailNotPostgres, Detail: fmt.Sprintf("MARLOWE_DATABASE_URL is a %s:// URL: Marlowe's store is PostgreSQL (with pgvector)", u.Scheme),
			Fix: "use postgres://user:password@host:5432/database (unset it for the embedded SQLite store)"}
	}
	return nil
}

// Diagnose tells which case a failed connection to dsn is, in one line
// (pgx reports each attempt of sslmode=prefer on a line of its own).
func Diagnose(dsn string, err error) Diagnosis {
	if d := CheckURL(dsn); d != nil {
		return *d
	}
	host, port, user, db := "?", "?", "?", "?"
	if cfg, perr := pgconn.ParseConfig(dsn); perr == nil {
		host, port, user, db = cfg.Host, fmt.Sprint(cfg.Port), cfg.User, cfg.Database
	} else {
		return Diagnosis{Failure: FailNotURL, Detail: "MARLOWE_DATABASE_URL does not parse: " + oneLine(perr.Error()),
			Fix: "write it as postgres://user:password@host:5432/database?sslmode=disable"}
	}
	at := fmt.Sprintf("%s:%s", host, port)
	var pg *pgconn.PgError
	var unknownCA x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var certInvalid x509.CertificateInvalidError
	var recordHeader tls.RecordHeaderError
	switch {
	case errors.As(err, &pg) && pg.Code == "3D000":
		return Diagnosis{Failure: FailNoDatabase, Detail: fmt.Sprintf("the server at %s has no database %q", at, db),
			Fix: fmt.Sprintf("create it: createdb -h %s -p %s -U %s %s (or correct the database name in MARLOWE_DATABASE_URL)", host, port, user, db)}
	case errors.As(err, &pg) && (pg.Code == "28P01" || pg.Code == "28000"):
		return Diagnosis{Failure: FailAuth, Detail: fmt.Sprintf("the server at %s refused user %q: %s (SQLSTATE %s)", at, user, pg.Message, pg.Code),
			Fix: "check the user and password in MARLOWE_DATABASE_URL (and that pg_hba.conf lets this user in from here)"}
	case errors.Is(err, syscall.ECONNREFUSED):
		return Diagnosis{Failure: FailRefused, Detail: fmt.Sprintf("nothing accepts connections at %s (connection refused)", at),
			Fix: "start PostgreSQL, or correct the host and port in MARLOWE_DATABASE_URL (docker compose: the host is postgres)"}
	case errors.As(err, &unknownCA), errors.As(err, &hostname), errors.As(err, &certInvalid), errors.As(err, &recordHeader),
		strings.Contains(err.Error(), "tls:"), strings.Contains(err.Error(), "x509:"), strings.Contains(err.Error(), "server refused TLS"):
		return Diagnosis{Failure: FailTLS, Detail: fmt.Sprintf("TLS with the server at %s failed: %s", at, innermost(err)),
			Fix: "match sslmode in MARLOWE_DATABASE_URL to the server: sslmode=disable for a local server without TLS; for verify-full, a certificate naming the host (sslrootcert=the CA file)"}
	}
	return Diagnosis{Failure: FailOther, Detail: fmt.Sprintf("connect to %s: %s", at, innermost(err)),
		Fix: "is PostgreSQL running and reachable from here? check host, port, user, password and database in MARLOWE_DATABASE_URL"}
}

// innermost is the last line of err's text without pgx's "failed to
// connect to `user=… database=…`:" preamble: the reason of the last attempt.
func innermost(err error) string {
	lines := strings.Split(strings.TrimSpace(err.Error()), "\n")
	last := strings.TrimSpace(lines[len(lines)-1])
	if i := strings.LastIndex(last, "`: "); i >= 0 {
		last = last[i+3:]
	}
	return oneLine(last)
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
