// Package postgres is the production store: the journal (Store) and the
// per-channel memory index (MemoryIndex, pgvector with row-level security)
// on PostgreSQL through pgx/v5.
package postgres

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/migrations"
)

// Store is a PostgreSQL-backed core.Journal. It is safe for concurrent use,
// and any number of Stores (in one process or many) may share a database.
type Store struct {
	pool   *pgxpool.Pool
	signer *core.Signer
	heads  headCache
}

var _ core.Journal = (*Store)(nil)

// Open connects to url, applies pending migrations and returns a journal
// that seals with signer. Pool settings come from the URL (pool_max_conns
// and friends); see defaultMaxConns. With a nil signer the journal is
// read-only: it reads and verifies, and Append and Redact fail with
// core.ErrReadOnly (verification needs public keys only).
func Open(ctx context.Context, url string, signer *core.Signer) (*Store, error) {
	pool, err := connect(ctx, url)
	if err != nil {
		return nil, err
	}
	if _, err := migrate(ctx, pool); err != nil {
		pool.Close()
		return nil, err
	}
	return &Store{pool: pool, signer: signer}, nil
}

// Migrate applies pending migrations to the database at url and returns the
// names of those it applied. Open and OpenMemoryIndex call it.
func Migrate(ctx context.Context, url string) ([]string, error) {
	pool, err := connect(ctx, url)
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	return migrate(ctx, pool)
}

// Close releases every connection.
func (s *Store) Close() { s.pool.Close() }

// defaultMaxConns is the pool size when the URL does not set
// pool_max_conns. An append holds its connection for two round trips and
// the commit's fsync, so the pool size caps how many channels append at
// once; pgx's own default, max(4, NumCPU), halves single-command append
// throughput with 16 busy channels (see BenchmarkAppend).
const defaultMaxConns = 16

// idleInTransactionTimeout is the store's connections' default
// idle_in_transaction_session_timeout (the URL may set another).
const idleInTransactionTimeout = "5s"

func connect(ctx context.Context, url string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		// pgx's parse errors do not echo the password.
		return nil, fmt.Errorf("open postgres store: parse url: %w", err)
	}
	if !strings.Contains(url, "pool_max_conns") {
		cfg.MaxConns = max(cfg.MaxConns, defaultMaxConns)
	}
	if _, set := cfg.ConnConfig.RuntimeParams["idle_in_transaction_session_timeout"]; !set {
		// A replica frozen between an append's two round trips (a VM
		// pause, SIGSTOP) would hold its channel's head and lease rows for
		// as long as it stays frozen, and no other replica could take the
		// channel over. The store's transactions never wait on anything
		// but the database between statements, so an idle one is a frozen
		// client: the server ends it and releases the rows.
		cfg.ConnConfig.RuntimeParams["idle_in_transaction_session_timeout"] = idleInTransactionTimeout
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open postgres store: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open postgres store: connect to %s:%d/%s: %w",
			cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Database, err)
	}
	return pool, nil
}

// migrate applies the embedded migrations under a session advisory lock, so
// replicas starting together apply each migration exactly once.
func migrate(ctx context.Context, pool *pgxpool.Pool) ([]string, error) {
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	// Poll every second (goose's default is 5s) so replicas starting
	// together do not idle; give up after five minutes.
	locker, err := lock.NewPostgresSessionLocker(lock.WithLockTimeout(1, 300))
	if err != nil {
		return nil, fmt.Errorf("migrate postgres: %w", err)
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, migrations.Postgres(),
		goose.WithSessionLocker(locker), goose.WithDisableGlobalRegistry(true))
	if err != nil {
		return nil, fmt.Errorf("migrate postgres: %w", err)
	}
	results, err := p.Up(ctx)
	if err != nil {
		return nil, fmt.Errorf("migrate postgres: %w", err)
	}
	applied := make([]string, 0, len(results))
	for _, r := range results {
		applied = append(applied, r.Source.Path)
	}
	return applied, nil
}
