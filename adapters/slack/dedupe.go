package slack

import (
	"time"

	"github.com/marlowe-bot/marlowe/internal/dedupe"
)

// Deduper remembers which inbound deliveries were already handed to the
// engine, so Slack's retries and its app_mention + message double delivery
// reach the engine once. Keys are ids only ("team:channel:ts"), never text.
// The claim → deliver → commit (or release) protocol is documented on
// internal/dedupe.Deduper; only builtin types appear in it, so a store can
// implement it without importing this package (store/redis.Deduper does).
type Deduper = dedupe.Deduper

// MemoryDeduper is the in-process Deduper for a single replica. Expired keys
// are swept as new ones arrive, so memory is bounded by the key rate × TTL.
type MemoryDeduper = dedupe.Memory

// NewMemoryDeduper returns an empty in-process Deduper. now may be nil
// (time.Now).
func NewMemoryDeduper(now func() time.Time) *MemoryDeduper { return dedupe.NewMemory(now) }
