package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/marlowe-bot/marlowe/core"
)

// The store is also the delivery retry queue (core.DeliveryQueue). Times
// are Unix milliseconds.

var _ core.DeliveryQueue = (*Store)(nil)

// Put implements core.DeliveryQueue.
func (s *Store) Put(ctx context.Context, d core.QueuedDelivery) error {
	b, err := json.Marshal(d.Inbound)
	if err != nil {
		return fmt.Errorf("queue delivery %s: %w", d.Key, err)
	}
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO delivery_queue (platform, key, inbound, queued_at, deadline, next_at, attempts, last_error)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (platform, key) DO NOTHING`,
			d.Platform, d.Key, string(b), d.QueuedAt.UnixMilli(), d.Deadline.UnixMilli(), d.NextAt.UnixMilli(), d.Attempts, d.LastError)
		return err
	})
	if err != nil {
		return fmt.Errorf("queue delivery %s: %w", d.Key, err)
	}
	return nil
}

// Claim implements core.DeliveryQueue. The write transaction (BEGIN
// IMMEDIATE) keeps two claimers, in this process or another, apart.
func (s *Store) Claim(ctx context.Context, platform string, now time.Time, lease time.Duration, limit int) ([]core.QueuedDelivery, error) {
	var out []core.QueuedDelivery
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		out = out[:0]
		rows, err := tx.QueryContext(ctx, `SELECT key, inbound, queued_at, deadline, attempts, last_error FROM delivery_queue
			WHERE platform = ? AND next_at <= ? ORDER BY next_at, key LIMIT ?`, platform, now.UnixMilli(), max(limit, 0))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			d := core.QueuedDelivery{Platform: platform, NextAt: now.Add(lease)}
			var in string
			var queued, deadline int64
			if err := rows.Scan(&d.Key, &in, &queued, &deadline, &d.Attempts, &d.LastError); err != nil {
				return err
			}
			if err := json.Unmarshal([]byte(in), &d.Inbound); err != nil {
				return fmt.Errorf("delivery %s: %w", d.Key, err)
			}
			d.QueuedAt, d.Deadline = time.UnixMilli(queued).UTC(), time.UnixMilli(deadline).UTC()
			out = append(out, d)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		rows.Close()
		for _, d := range out {
			if _, err := tx.ExecContext(ctx, `UPDATE delivery_queue SET next_at = ? WHERE platform = ? AND key = ?`,
				d.NextAt.UnixMilli(), platform, d.Key); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("claim deliveries: %w", err)
	}
	return out, nil
}

// Retry implements core.DeliveryQueue.
func (s *Store) Retry(ctx context.Context, platform, key string, next time.Time, lastErr string) error {
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE delivery_queue SET attempts = attempts + 1, next_at = ?, last_error = ? WHERE platform = ? AND key = ?`,
			next.UnixMilli(), lastErr, platform, key)
		return err
	})
	if err != nil {
		return fmt.Errorf("retry delivery %s: %w", key, err)
	}
	return nil
}

// Ack implements core.DeliveryQueue.
func (s *Store) Ack(ctx context.Context, platform, key string) error {
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM delivery_queue WHERE platform = ? AND key = ?`, platform, key)
		return err
	})
	if err != nil {
		return fmt.Errorf("ack delivery %s: %w", key, err)
	}
	return nil
}

// Backlog implements core.DeliveryQueue.
func (s *Store) Backlog(ctx context.Context, platform string) (core.DeliveryBacklog, error) {
	var n int
	var oldest sql.NullInt64
	if err := s.r.QueryRowContext(ctx, `SELECT count(*), min(queued_at) FROM delivery_queue WHERE platform = ?`, platform).Scan(&n, &oldest); err != nil {
		return core.DeliveryBacklog{}, fmt.Errorf("delivery backlog: %w", err)
	}
	b := core.DeliveryBacklog{Queued: n}
	if oldest.Valid {
		b.Oldest = time.UnixMilli(oldest.Int64).UTC()
	}
	return b, nil
}
