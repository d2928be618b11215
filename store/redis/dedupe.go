package redis

// This file is the inbound-delivery Deduper (used by the platform adapters,
// e.g. adapters/slack.WithDeduper): one TTL key per delivered message id,
// shared by every replica.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// Keys (P = the prefix given at construction):
//
//	P d:<key>  "c:<token>"  PX lease   a delivery in flight
//	P d:<key>  "done"       PX ttl     delivered
//
// Keys are message ids ("team:channel:ts"), never message text.

const dedupeDone = "done"

// dedupeReleaseLua deletes KEYS[1] only while it still holds the caller's
// claim (ARGV[1]): a claim that expired and was taken over stays.
const dedupeReleaseLua = `
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
`

// Deduper is a Redis-backed, multi-replica delivery deduper: SET NX with a
// lease claims a message id, "done" with a TTL (at least 10 minutes for
// Slack) remembers it was delivered.
type Deduper struct {
	rdb     goredis.UniversalClient
	prefix  string
	release *goredis.Script
}

// NewDeduper returns a deduper on rdb whose keys all start with prefix
// (e.g. "marlowe:slack:").
func NewDeduper(rdb goredis.UniversalClient, prefix string) *Deduper {
	return &Deduper{rdb: rdb, prefix: prefix, release: goredis.NewScript(dedupeReleaseLua)}
}

func (d *Deduper) key(k string) string { return d.prefix + "d:" + k }

// Claim takes key for lease. It returns a token when the caller now holds
// the claim, done=true when key was delivered already, and neither while
// another delivery holds it.
func (d *Deduper) Claim(ctx context.Context, key string, lease time.Duration) (string, bool, error) {
	if lease <= 0 {
		return "", false, errors.New("redis dedupe: lease must be positive")
	}
	tok, err := dedupeToken()
	if err != nil {
		return "", false, err
	}
	k := d.key(key)
	for range 3 {
		ok, err := d.rdb.SetNX(ctx, k, "c:"+tok, lease).Result()
		if err != nil {
			return "", false, fmt.Errorf("redis dedupe: claim: %w", err)
		}
		if ok {
			return tok, false, nil
		}
		v, err := d.rdb.Get(ctx, k).Result()
		if errors.Is(err, goredis.Nil) {
			continue // expired between the two calls: try again
		}
		if err != nil {
			return "", false, fmt.Errorf("redis dedupe: read claim: %w", err)
		}
		return "", v == dedupeDone, nil
	}
	return "", false, nil // contended: report in flight
}

// Commit marks key delivered for ttl (whoever holds the claim: the message
// was delivered).
func (d *Deduper) Commit(ctx context.Context, key, _ string, ttl time.Duration) error {
	if ttl <= 0 {
		return errors.New("redis dedupe: ttl must be positive")
	}
	if err := d.rdb.Set(ctx, d.key(key), dedupeDone, ttl).Err(); err != nil {
		return fmt.Errorf("redis dedupe: commit: %w", err)
	}
	return nil
}

// Release drops the caller's claim so a redelivery can try again.
func (d *Deduper) Release(ctx context.Context, key, token string) error {
	if token == "" {
		return nil
	}
	if err := d.release.Run(ctx, d.rdb, []string{d.key(key)}, "c:"+token).Err(); err != nil && !errors.Is(err, goredis.Nil) {
		return fmt.Errorf("redis dedupe: release: %w", err)
	}
	return nil
}

func dedupeToken() (string, error) {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("redis dedupe: token: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}
