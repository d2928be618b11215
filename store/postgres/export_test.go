package postgres

import "github.com/jackc/pgx/v5/pgxpool"

// Pool is the store's connection pool, for tests that tamper with rows.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }
