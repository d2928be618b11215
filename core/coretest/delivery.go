package coretest

import (
	"cmp"
	"context"
	"encoding/json"
	"slices"
	"sync"
	"time"

	"github.com/marlowe-bot/marlowe/core"
)

// MemDeliveryQueue is an in-process core.DeliveryQueue (it passes
// core/deliverytest). Like the stores it keeps the inbound as JSON, so what
// comes back is what a database would give back.
type MemDeliveryQueue struct {
	mu   sync.Mutex
	rows map[[2]string]*memDelivery
}

type memDelivery struct {
	d       core.QueuedDelivery
	inbound []byte
}

var _ core.DeliveryQueue = (*MemDeliveryQueue)(nil)

// NewMemDeliveryQueue returns an empty queue.
func NewMemDeliveryQueue() *MemDeliveryQueue {
	return &MemDeliveryQueue{rows: map[[2]string]*memDelivery{}}
}

// Put implements core.DeliveryQueue.
func (q *MemDeliveryQueue) Put(ctx context.Context, d core.QueuedDelivery) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b, err := json.Marshal(d.Inbound)
	if err != nil {
		return err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	k := [2]string{d.Platform, d.Key}
	if _, ok := q.rows[k]; ok {
		return nil
	}
	d.Inbound = core.Inbound{}
	q.rows[k] = &memDelivery{d: d, inbound: b}
	return nil
}

// Claim implements core.DeliveryQueue.
func (q *MemDeliveryQueue) Claim(ctx context.Context, platform string, now time.Time, lease time.Duration, limit int) ([]core.QueuedDelivery, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	var due []*memDelivery
	for k, r := range q.rows {
		if k[0] == platform && !r.d.NextAt.After(now) {
			due = append(due, r)
		}
	}
	slices.SortFunc(due, func(a, b *memDelivery) int {
		return cmp.Or(a.d.NextAt.Compare(b.d.NextAt), cmp.Compare(a.d.Key, b.d.Key))
	})
	var out []core.QueuedDelivery
	for _, r := range due[:min(len(due), max(limit, 0))] {
		r.d.NextAt = now.Add(lease)
		d := r.d
		if err := json.Unmarshal(r.inbound, &d.Inbound); err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

// Retry implements core.DeliveryQueue.
func (q *MemDeliveryQueue) Retry(ctx context.Context, platform, key string, next time.Time, lastErr string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if r := q.rows[[2]string{platform, key}]; r != nil {
		r.d.Attempts++
		r.d.NextAt, r.d.LastError = next, lastErr
	}
	return nil
}

// Ack implements core.DeliveryQueue.
func (q *MemDeliveryQueue) Ack(ctx context.Context, platform, key string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.rows, [2]string{platform, key})
	return nil
}

// Backlog implements core.DeliveryQueue.
func (q *MemDeliveryQueue) Backlog(ctx context.Context, platform string) (core.DeliveryBacklog, error) {
	if err := ctx.Err(); err != nil {
		return core.DeliveryBacklog{}, err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	var b core.DeliveryBacklog
	for k, r := range q.rows {
		if k[0] != platform {
			continue
		}
		b.Queued++
		if b.Oldest.IsZero() || r.d.QueuedAt.Before(b.Oldest) {
			b.Oldest = r.d.QueuedAt
		}
	}
	return b, nil
}
