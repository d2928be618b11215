package postgres

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/marlowe-bot/marlowe/core"
)

// The store is also the delivery retry queue (core.DeliveryQueue), shared
// by the replicas: each claim takes rows no other claim holds (FOR UPDATE
// SKIP LOCKED) and moves them a lease ahead.

var _ core.DeliveryQueue = (*Store)(nil)

// Put implements core.DeliveryQueue.
func (s *Store) Put(ctx context.Context, d core.QueuedDelivery) error {
	b, err := json.Marshal(d.Inbound)
	if err != nil {
		return fmt.Errorf("queue delivery %s: %w", d.Key, err)
	}
	_, err = s.pool.Exec(ctx, `INSERT INTO delivery_queue (platform, key, inbound, queued_at, deadline, next_at, attempts, last_error)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (platform, key) DO NOTHING`,
		d.Platform, d.Key, b, d.QueuedAt, d.Deadline, d.NextAt, d.Attempts, d.LastError)
	if err != nil {
		return fmt.Errorf("queue delivery %s: %w", d.Key, err)
	}
	return nil
}

// Claim implements core.DeliveryQueue.
func (s *Store) Claim(ctx context.Context, platform string, now time.Time, lease time.Duration, limit int) ([]core.QueuedDelivery, error) {
	rows, err := s.pool.Query(ctx, `WITH due AS (
			SELECT platform, key, next_at AS was FROM delivery_queue
			WHERE platform = $1 AND next_at <= $2 ORDER BY next_at, key LIMIT $3 FOR UPDATE SKIP LOCKED)
		UPDATE delivery_queue q SET next_at = $4 FROM due
		WHERE q.platform = due.platform AND q.key = due.key
		RETURNING q.key, q.inbound, q.queued_at, q.deadline, q.attempts, q.last_error, q.next_at, due.was`,
		platform, now, max(limit, 0), now.Add(lease))
	if err != nil {
		return nil, fmt.Errorf("claim deliveries: %w", err)
	}
	defer rows.Close()
	type claimed struct {
		d   core.QueuedDelivery
		was time.Time
	}
	var got []claimed
	for rows.Next() {
		c := claimed{d: core.QueuedDelivery{Platform: platform}}
		var in []byte
		if err := rows.Scan(&c.d.Key, &in, &c.d.QueuedAt, &c.d.Deadline, &c.d.Attempts, &c.d.LastError, &c.d.NextAt, &c.was); err != nil {
			return nil, fmt.Errorf("claim deliveries: %w", err)
		}
		if err := json.Unmarshal(in, &c.d.Inbound); err != nil {
			return nil, fmt.Errorf("delivery %s: %w", c.d.Key, err)
		}
		got = append(got, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("claim deliveries: %w", err)
	}
	// RETURNING keeps no order: as they were due.
	slices.SortFunc(got, func(a, b claimed) int { return cmp.Or(a.was.Compare(b.was), cmp.Compare(a.d.Key, b.d.Key)) })
	out := make([]core.QueuedDelivery, len(got))
	for i, c := range got {
		out[i] = c.d
	}
	return out, nil
}

// Retry implements core.DeliveryQueue.
func (s *Store) Retry(ctx context.Context, platform, key string, next time.Time, lastErr string) error {
	_, err := s.pool.Exec(ctx, `UPDATE delivery_queue SET attempts = attempts + 1, next_at = $3, last_error = $4 WHERE platform = $1 AND key = $2`,
		platform, key, next, lastErr)
	if err != nil {
		return fmt.Errorf("retry delivery %s: %w", key, err)
	}
	return nil
}

// Ack implements core.DeliveryQueue.
func (s *Store) Ack(ctx context.Context, platform, key string) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM delivery_queue WHERE platform = $1 AND key = $2`, platform, key); err != nil {
		return fmt.Errorf("ack delivery %s: %w", key, err)
	}
	return nil
}

// Backlog implements core.DeliveryQueue.
func (s *Store) Backlog(ctx context.Context, platform string) (core.DeliveryBacklog, error) {
	var b core.DeliveryBacklog
	var oldest *time.Time
	if err := s.pool.QueryRow(ctx, `SELECT count(*), min(queued_at) FROM delivery_queue WHERE platform = $1`, platform).Scan(&b.Queued, &oldest); err != nil {
		return core.DeliveryBacklog{}, fmt.Errorf("delivery backlog: %w", err)
	}
	if oldest != nil {
		b.Oldest = *oldest
	}
	return b, nil
}
