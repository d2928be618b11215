// Package sqlite is the embedded default store: the journal (Store) and the
// per-channel memory index (MemoryIndex, FTS5 and exact cosine) in one
// SQLite file through the pure-Go driver modernc.org/sqlite.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/pressly/goose/v3"
	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/migrations"
)

// busyTimeout is how long a writer waits for another process's write
// transaction before giving up.
const busyTimeout = 10 * time.Second

// Store is a SQLite-backed core.Journal. It is safe for concurrent use, and
// several processes may open the same file.
type Store struct {
	// w has exactly one connection, and every transaction on it is BEGIN
	// IMMEDIATE: appenders in this process queue in database/sql, and
	// appenders in other processes wait on SQLite's write lock, so no two
	// ever read the same head.
	w *sql.DB
	// r serves reads; WAL lets them run beside the writer.
	r      *sql.DB
	signer *core.Signer
}

var _ core.Journal = (*Store)(nil)

// Open opens (creating if needed) the database file at path, applies pending
// migrations and returns a journal that seals with signer. With a nil signer
// the journal is read-only: it reads and verifies, and Append and Redact
// fail with core.ErrReadOnly (verification needs public keys only).
func Open(ctx context.Context, path string, signer *core.Signer) (*Store, error) {
	w, r, err := openDBsRetrying(ctx, path)
	if err != nil {
		return nil, err
	}
	if _, err := migrate(ctx, path); err != nil {
		w.Close()
		r.Close()
		return nil, err
	}
	return &Store{w: w, r: r, signer: signer}, nil
}

// Migrate applies pending migrations to the file at path and returns the
// names of those it applied. Open calls it.
func Migrate(ctx context.Context, path string) ([]string, error) {
	return migrate(ctx, path)
}

// Close closes both pools.
func (s *Store) Close() error {
	return errors.Join(s.w.Close(), s.r.Close())
}

// dsn builds the driver's connection string. Every connection gets WAL (one
// writer beside many readers, and cheap durable commits), a busy timeout
// (other processes' writes are waited for, not failed), foreign keys,
// synchronous=FULL (a commit is durable when Append returns) and
// secure_delete (a redacted payload's bytes are overwritten, not left in a
// free page).
func dsn(path string, write bool) (string, error) {
	if path == "" || strings.ContainsAny(path, "?#") || strings.HasPrefix(path, "file:") {
		return "", fmt.Errorf("sqlite path %q: want a plain file path", path)
	}
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busyTimeout.Milliseconds()))
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "foreign_keys(1)")
	q.Add("_pragma", "synchronous(FULL)")
	q.Add("_pragma", "secure_delete(1)")
	if write {
		q.Set("_txlock", "immediate")
	} else {
		q.Add("_pragma", "query_only(1)")
	}
	return path + "?" + q.Encode(), nil
}

// openDBsRetrying is openDBs, retried while the file is busy: processes
// opening a new file together race to switch it to WAL, and SQLite answers
// the loser SQLITE_BUSY at once, without its busy handler. A retry finds the
// file switched.
func openDBsRetrying(ctx context.Context, path string) (w, r *sql.DB, err error) {
	const attempts = 8
	for i := range attempts {
		w, r, err = openDBs(ctx, path)
		if err == nil || !isBusy(err) || i == attempts-1 {
			return w, r, err
		}
		select {
		case <-time.After(time.Duration(i+1) * 20 * time.Millisecond):
		case <-ctx.Done():
			return nil, nil, fmt.Errorf("%w (after: %w)", ctx.Err(), err)
		}
	}
	return w, r, err
}

// isBusy reports whether err is SQLite's SQLITE_BUSY (any extended code).
func isBusy(err error) bool {
	var coded interface{ Code() int }
	return errors.As(err, &coded) && coded.Code()&0xff == 5 // SQLITE_BUSY
}

func openDBs(ctx context.Context, path string) (w, r *sql.DB, err error) {
	wdsn, err := dsn(path, true)
	if err != nil {
		return nil, nil, fmt.Errorf("open sqlite store: %w", err)
	}
	rdsn, _ := dsn(path, false)
	w, err = sql.Open("sqlite", wdsn)
	if err != nil {
		return nil, nil, fmt.Errorf("open sqlite store %s: %w", path, err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)
	// The first connection creates the file and switches it to WAL; readers
	// opened before that could race the mode change.
	if err := w.PingContext(ctx); err != nil {
		w.Close()
		return nil, nil, fmt.Errorf("open sqlite store %s: %w", path, err)
	}
	r, err = sql.Open("sqlite", rdsn)
	if err != nil {
		w.Close()
		return nil, nil, fmt.Errorf("open sqlite store %s: %w", path, err)
	}
	r.SetMaxIdleConns(4)
	if err := r.PingContext(ctx); err != nil {
		w.Close()
		r.Close()
		return nil, nil, fmt.Errorf("open sqlite store %s: %w", path, err)
	}
	return w, r, nil
}

// migrate applies the embedded migrations on a connection of its own.
// SQLite has no advisory lock to hold across goose's transactions, so two
// processes migrating a new file at once can both start a migration; the
// loser's transaction fails (table exists) and rolls back, and a retry finds
// the migration applied.
func migrate(ctx context.Context, path string) ([]string, error) {
	wdsn, err := dsn(path, true)
	if err != nil {
		return nil, fmt.Errorf("migrate sqlite: %w", err)
	}
	db, err := sql.Open("sqlite", wdsn)
	if err != nil {
		return nil, fmt.Errorf("migrate sqlite %s: %w", path, err)
	}
	defer db.Close()
	const attempts = 5
	var applied []string
	for i := range attempts {
		// A fresh provider each time: goose remembers a failed version-table
		// check for the life of a provider.
		p, err := goose.NewProvider(goose.DialectSQLite3, db, migrations.SQLite(), goose.WithDisableGlobalRegistry(true))
		if err != nil {
			return nil, fmt.Errorf("migrate sqlite %s: %w", path, err)
		}
		results, err := p.Up(ctx)
		for _, r := range results {
			if r.Error == nil {
				applied = append(applied, r.Source.Path)
			}
		}
		if err == nil {
			return applied, nil
		}
		if i == attempts-1 {
			return applied, fmt.Errorf("migrate sqlite %s: %w", path, err)
		}
		select {
		case <-time.After(time.Duration(i+1) * 50 * time.Millisecond):
		case <-ctx.Done():
			return applied, fmt.Errorf("migrate sqlite %s: %w (after: %v)", path, ctx.Err(), err)
		}
	}
	return applied, nil
}
