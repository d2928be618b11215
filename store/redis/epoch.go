package redis

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"

	goredis "github.com/redis/go-redis/v9"
)

// Epoch tells whether Redis still holds what was written to it. Redis keeps
// only what can be rebuilt (windows, dedupe), and a restart without
// persistence comes back empty: a missing epoch key means whatever was
// derived into Redis must be derived again from the journal.
type Epoch struct {
	rdb goredis.UniversalClient
	key string
}

// NewEpoch returns the epoch marker under prefix (e.g. "marlowe:").
func NewEpoch(rdb goredis.UniversalClient, prefix string) *Epoch {
	return &Epoch{rdb: rdb, key: prefix + "epoch"}
}

// Lost reports whether the marker is missing: Redis is new or lost its data.
func (e *Epoch) Lost(ctx context.Context) (bool, error) {
	n, err := e.rdb.Exists(ctx, e.key).Result()
	if err != nil {
		return false, fmt.Errorf("redis epoch: %w", err)
	}
	return n == 0, nil
}

// Mark records that Redis holds rebuilt state again. Call it after the
// rebuild, so a replica dying mid-rebuild leaves the epoch lost.
func (e *Epoch) Mark(ctx context.Context) error {
	var b [8]byte
	_, _ = rand.Read(b[:])
	if err := e.rdb.Set(ctx, e.key, hex.EncodeToString(b[:]), 0).Err(); err != nil {
		return fmt.Errorf("redis epoch: mark: %w", err)
	}
	return nil
}
