package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/marlowe-bot/marlowe/core"
)

// The store is also a lease table (core.Leases), so the journal's fencing
// works the same as on PostgreSQL. Embedded mode is one process and holds
// every lease; the table is what lets two processes on one file (a `bot`
// command next to `bot serve`) stay honest. Time is Unix milliseconds.

var _ core.Leases = (*Store)(nil)

// Acquire implements core.Leases.
func (s *Store) Acquire(ctx context.Context, name, holder string, ttl time.Duration) (core.Fence, bool, error) {
	if holder == "" {
		return core.Fence{}, false, errors.New("acquire lease: empty holder")
	}
	var token int64
	now := time.Now().UnixMilli()
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		return tx.QueryRowContext(ctx, `INSERT INTO leases (name, holder, token, expires_at) VALUES (?, ?, 1, ?)
			ON CONFLICT (name) DO UPDATE SET
				token = CASE WHEN leases.holder = excluded.holder THEN leases.token ELSE leases.token + 1 END,
				holder = excluded.holder, expires_at = excluded.expires_at
			WHERE leases.holder = excluded.holder OR leases.holder = '' OR leases.expires_at <= ?
			RETURNING token`, name, holder, now+ttl.Milliseconds(), now).Scan(&token)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return core.Fence{}, false, nil
	}
	if err != nil {
		return core.Fence{}, false, fmt.Errorf("acquire lease %s: %w", name, err)
	}
	return core.Fence{Name: name, Token: token}, true, nil
}

// Renew implements core.Leases.
func (s *Store) Renew(ctx context.Context, holder string, ttl time.Duration, names ...string) ([]string, error) {
	var held []string
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		exp := time.Now().UnixMilli() + ttl.Milliseconds()
		for _, n := range names {
			res, err := tx.ExecContext(ctx, `UPDATE leases SET expires_at = ? WHERE holder = ? AND name = ?`, exp, holder, n)
			if err != nil {
				return err
			}
			if k, err := res.RowsAffected(); err != nil {
				return err
			} else if k == 1 {
				held = append(held, n)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("renew %d lease(s): %w", len(names), err)
	}
	return held, nil
}

// Release implements core.Leases.
func (s *Store) Release(ctx context.Context, holder string, names ...string) error {
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		now := time.Now().UnixMilli()
		for _, n := range names {
			if _, err := tx.ExecContext(ctx, `UPDATE leases SET holder = '', expires_at = ? WHERE holder = ? AND name = ?`, now, holder, n); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("release %d lease(s): %w", len(names), err)
	}
	return nil
}

// Lapsed implements core.Leases.
func (s *Store) Lapsed(ctx context.Context, prefix string) ([]string, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT name FROM leases WHERE holder <> '' AND expires_at <= ? ORDER BY name`, time.Now().UnixMilli())
	if err != nil {
		return nil, fmt.Errorf("list lapsed leases: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, fmt.Errorf("list lapsed leases: %w", err)
		}
		if strings.HasPrefix(n, prefix) {
			out = append(out, n)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list lapsed leases: %w", err)
	}
	return out, nil
}

// Live implements core.Leases.
func (s *Store) Live(ctx context.Context, prefix string) ([]string, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT name FROM leases WHERE holder <> '' AND expires_at > ? ORDER BY name`, time.Now().UnixMilli())
	if err != nil {
		return nil, fmt.Errorf("list live leases: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, fmt.Errorf("list live leases: %w", err)
		}
		if strings.HasPrefix(n, prefix) {
			out = append(out, n)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list live leases: %w", err)
	}
	return out, nil
}
