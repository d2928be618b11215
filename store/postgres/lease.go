package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/marlowe-bot/marlowe/core"
)

// The store is also the replicas' lease table (core.Leases). Time is the
// database's clock (clock_timestamp()), so replicas with skewed clocks still
// agree on who holds what.

var _ core.Leases = (*Store)(nil)

// acquireLockTimeout bounds how long Acquire waits for a lease row another
// transaction holds.
const acquireLockTimeout = "250ms"

// Acquire implements core.Leases.
func (s *Store) Acquire(ctx context.Context, name, holder string, ttl time.Duration) (core.Fence, bool, error) {
	if holder == "" {
		return core.Fence{}, false, errors.New("acquire lease: empty holder")
	}
	var token int64
	// An append in flight holds the lease row FOR SHARE for milliseconds;
	// a longer wait means its writer is stuck (frozen mid-transaction), and
	// the lease is busy: not acquired now, rather than blocking the
	// caller's whole lease loop (its renewals included) behind it.
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL lock_timeout = '`+acquireLockTimeout+`'`); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `INSERT INTO leases AS l (name, holder, token, expires_at)
			VALUES ($1, $2, 1, clock_timestamp() + $3 * interval '1 millisecond')
			ON CONFLICT (name) DO UPDATE SET
				token = CASE WHEN l.holder = EXCLUDED.holder THEN l.token ELSE l.token + 1 END,
				holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at
			WHERE l.holder = EXCLUDED.holder OR l.holder = '' OR l.expires_at <= clock_timestamp()
			RETURNING token`, name, holder, ttl.Milliseconds()).Scan(&token)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return core.Fence{}, false, nil
	}
	if pgErr := (*pgconn.PgError)(nil); errors.As(err, &pgErr) && pgErr.Code == "55P03" { // lock_not_available
		return core.Fence{}, false, nil
	}
	if err != nil {
		return core.Fence{}, false, fmt.Errorf("acquire lease %s: %w", name, err)
	}
	return core.Fence{Name: name, Token: token}, true, nil
}

// Renew implements core.Leases.
func (s *Store) Renew(ctx context.Context, holder string, ttl time.Duration, names ...string) ([]string, error) {
	if len(names) == 0 {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, `UPDATE leases SET expires_at = clock_timestamp() + $3 * interval '1 millisecond'
		WHERE holder = $1 AND name = ANY($2) RETURNING name`, holder, names, ttl.Milliseconds())
	if err != nil {
		return nil, fmt.Errorf("renew %d lease(s): %w", len(names), err)
	}
	held, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("renew %d lease(s): %w", len(names), err)
	}
	return held, nil
}

// Release implements core.Leases.
func (s *Store) Release(ctx context.Context, holder string, names ...string) error {
	if len(names) == 0 {
		return nil
	}
	if _, err := s.pool.Exec(ctx, `UPDATE leases SET holder = '', expires_at = clock_timestamp()
		WHERE holder = $1 AND name = ANY($2)`, holder, names); err != nil {
		return fmt.Errorf("release %d lease(s): %w", len(names), err)
	}
	return nil
}

// Live implements core.Leases.
func (s *Store) Live(ctx context.Context, prefix string) ([]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT name FROM leases
		WHERE holder <> '' AND expires_at > clock_timestamp() AND starts_with(name, $1) ORDER BY name`, prefix)
	if err != nil {
		return nil, fmt.Errorf("list live leases: %w", err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("list live leases: %w", err)
	}
	return names, nil
}

// Lapsed implements core.Leases.
func (s *Store) Lapsed(ctx context.Context, prefix string) ([]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT name FROM leases
		WHERE holder <> '' AND expires_at <= clock_timestamp() AND starts_with(name, $1) ORDER BY name`, prefix)
	if err != nil {
		return nil, fmt.Errorf("list lapsed leases: %w", err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("list lapsed leases: %w", err)
	}
	return names, nil
}
