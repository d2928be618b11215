// Package testpg gives each test its own throwaway PostgreSQL database, so
// test packages can run in parallel against one server without seeing each
// other's rows.
//
// The server is MARLOWE_TEST_DATABASE_URL, or DefaultURL. When it cannot be
// reached the test is skipped with a loud message, unless
// MARLOWE_REQUIRE_SERVICES=1, which turns that into a failure (CI sets it).
package testpg

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

const (
	// EnvURL names the server (any database on it; it is used to create
	// and drop the per-test databases).
	EnvURL = "MARLOWE_TEST_DATABASE_URL"
	// EnvRequire, set to 1, makes an unreachable server fail tests
	// instead of skipping them.
	EnvRequire = "MARLOWE_REQUIRE_SERVICES"
	// DefaultURL is the local development server (trust auth).
	DefaultURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
)

// New creates a fresh, empty database for tb and returns its URL. The
// database is dropped when tb's cleanup runs; register anything that holds
// connections to it (a store's Close) after calling New, so it closes first.
// The vector extension is created in it when the server has pgvector.
func New(tb testing.TB) string {
	tb.Helper()
	admin := os.Getenv(EnvURL)
	if admin == "" {
		admin = DefaultURL
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()

	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		unavailable(tb, admin, err)
		return ""
	}
	defer conn.Close(context.WithoutCancel(ctx))

	name := dbName(tb.Name())
	// template0 never has connections, so concurrent CREATE DATABASE calls
	// from parallel test packages cannot trip over each other.
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()+" TEMPLATE template0"); err != nil {
		tb.Fatalf("testpg: create database %s: %v", name, err)
	}
	tb.Cleanup(func() { drop(tb, admin, name) })

	dbURL, err := withDatabase(admin, name)
	if err != nil {
		tb.Fatalf("testpg: %v", err)
	}
	createVector(ctx, tb, dbURL)
	return dbURL
}

// Pooled returns conn with its pools capped at n connections
// (pool_max_conns). A test that starts several bot processes on one
// database uses it: each process would otherwise open up to its production
// pool sizes, and parallel packages share one server's max_connections.
func Pooled(conn string, n int) string {
	kv := fmt.Sprintf("pool_max_conns=%d", n)
	switch {
	case !strings.Contains(conn, "://"):
		return conn + " " + kv
	case strings.Contains(conn, "?"):
		return conn + "&" + kv
	}
	return conn + "?" + kv
}

// unavailable skips (or, when services are required, fails) a test that
// needs a server it cannot reach.
func unavailable(tb testing.TB, admin string, err error) {
	tb.Helper()
	msg := fmt.Sprintf("PostgreSQL is unreachable at %s: %v", redact(admin), err)
	if os.Getenv(EnvRequire) == "1" {
		tb.Fatalf("testpg: %s (%s=1)", msg, EnvRequire)
	}
	tb.Skipf("\n*** SKIPPING %s: %s\n*** set %s to a reachable server, or %s=1 to fail instead of skipping ***",
		tb.Name(), msg, EnvURL, EnvRequire)
}

// createVector installs pgvector when the server has it. Journal tests do
// not need it, so its absence is only logged.
func createVector(ctx context.Context, tb testing.TB, dbURL string) {
	tb.Helper()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		tb.Fatalf("testpg: connect to the new database: %v", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var available bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'vector')`).Scan(&available); err != nil {
		tb.Fatalf("testpg: look for the vector extension: %v", err)
	}
	if !available {
		tb.Logf("testpg: pgvector is not installed on the server; database created without the vector extension")
		return
	}
	if _, err := conn.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS vector`); err != nil {
		tb.Logf("testpg: create extension vector: %v (continuing without it)", err)
	}
}

func drop(tb testing.TB, admin, name string) {
	// The test's context is already cancelled when cleanup runs.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		tb.Errorf("testpg: connect to drop database %s: %v", name, err)
		return
	}
	defer conn.Close(ctx)
	// FORCE ends connections a failed test may have leaked.
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
		tb.Errorf("testpg: drop database %s: %v", name, err)
	}
}

// dbName is a valid, unique identifier (at most 63 bytes) that still says
// which test made it, for anyone looking at a leftover database.
func dbName(testName string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(testName) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
		if b.Len() >= 32 {
			break
		}
	}
	var rnd [6]byte
	_, _ = rand.Read(rnd[:]) // crypto/rand.Read never fails
	return "marlowe_t_" + b.String() + "_" + hex.EncodeToString(rnd[:])
}

// withDatabase points a connection string (URL or keyword/value form) at
// another database on the same server.
func withDatabase(conn, name string) (string, error) {
	if strings.HasPrefix(conn, "postgres://") || strings.HasPrefix(conn, "postgresql://") {
		u, err := url.Parse(conn)
		if err != nil {
			return "", fmt.Errorf("parse %s: %w", EnvURL, err)
		}
		u.Path = "/" + name
		return u.String(), nil
	}
	// keyword/value: a later dbname wins.
	return conn + " dbname=" + name, nil
}

// redact hides a password in messages.
func redact(conn string) string {
	if u, err := url.Parse(conn); err == nil && u.Scheme != "" {
		return u.Redacted()
	}
	return "(keyword/value connection string)"
}
