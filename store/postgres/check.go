package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"github.com/marlowe-bot/marlowe/migrations"
)

// Health is what Check found on a database.
type Health struct {
	Server string // server_version
	// Applied is the newest migration version the database records (0:
	// none yet); Known the newest one this build carries.
	Applied, Known int64
	// Vector is the installed pgvector version ("" when not installed);
	// VectorAvailable says whether the server could install it.
	Vector          string
	VectorAvailable bool
}

// Pending reports whether migrations are still to be applied.
func (h Health) Pending() bool { return h.Applied < h.Known }

// Check connects to url and reports the server, the migration state and
// pgvector without changing anything (bot doctor runs it; serve and bot
// migrate apply the migrations).
func Check(ctx context.Context, url string) (Health, error) {
	var h Health
	pool, err := connect(ctx, url)
	if err != nil {
		return h, err
	}
	defer pool.Close()
	if err := pool.QueryRow(ctx, `SHOW server_version`).Scan(&h.Server); err != nil {
		return h, fmt.Errorf("postgres: server version: %w", err)
	}
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	p, err := goose.NewProvider(goose.DialectPostgres, db, migrations.Postgres(), goose.WithDisableGlobalRegistry(true))
	if err != nil {
		return h, fmt.Errorf("postgres: migrations: %w", err)
	}
	for _, s := range p.ListSources() {
		h.Known = max(h.Known, s.Version)
	}
	var table bool
	if err := pool.QueryRow(ctx, `SELECT to_regclass('goose_db_version') IS NOT NULL`).Scan(&table); err != nil {
		return h, fmt.Errorf("postgres: migration table: %w", err)
	}
	if table {
		if err := pool.QueryRow(ctx, `SELECT COALESCE(MAX(version_id), 0) FROM goose_db_version WHERE is_applied`).Scan(&h.Applied); err != nil {
			return h, fmt.Errorf("postgres: migration version: %w", err)
		}
	}
	var installed *string
	err = pool.QueryRow(ctx, `SELECT installed_version FROM pg_available_extensions WHERE name = 'vector'`).Scan(&installed)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
	case err != nil:
		return h, fmt.Errorf("postgres: pgvector: %w", err)
	default:
		h.VectorAvailable = true
		if installed != nil {
			h.Vector = *installed
		}
	}
	return h, nil
}
