package redis

// This file is a small shared key-value store with expiry, for state a
// replica must be able to read after the one that wrote it died and that
// is worthless after its TTL (adapters/discord keeps a slash command's
// interaction token here for its 15 minutes).

import (
	"context"
	"errors"
	"fmt"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// KV is SET NX / GET under a prefix.
type KV struct {
	rdb    goredis.UniversalClient
	prefix string
}

// NewKV returns a KV whose keys start with prefix.
func NewKV(rdb goredis.UniversalClient, prefix string) *KV {
	return &KV{rdb: rdb, prefix: prefix}
}

// SetNX stores val under key for ttl unless the key holds a value; it
// reports whether it stored (the first writer wins).
func (k *KV) SetNX(ctx context.Context, key string, val []byte, ttl time.Duration) (bool, error) {
	ok, err := k.rdb.SetNX(ctx, k.prefix+key, val, ttl).Result()
	if err != nil {
		return false, fmt.Errorf("redis kv: set %s: %w", key, err)
	}
	return ok, nil
}

// Get returns key's value, and false when it has none (or it expired).
func (k *KV) Get(ctx context.Context, key string) ([]byte, bool, error) {
	b, err := k.rdb.Get(ctx, k.prefix+key).Bytes()
	if errors.Is(err, goredis.Nil) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("redis kv: get %s: %w", key, err)
	}
	return b, true, nil
}
