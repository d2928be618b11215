package telegram

import (
	"time"

	"github.com/marlowe-bot/marlowe/internal/dedupe"
)

// Deduper remembers which updates were already handed to the engine, so a
// webhook retry, a redelivery after a crash between journaling and
// confirming the offset, or two replicas receiving one webhook reach the
// engine once. Keys are ids only ("upd:<bot id>:<update_id>"), never text.
// The protocol (claim → deliver → commit or release) is
// internal/dedupe.Deduper, shared with the other adapters, so
// store/redis.Deduper serves them all.
type Deduper = dedupe.Deduper

// MemoryDeduper is the in-process Deduper for a single replica. Expired keys
// are swept as new ones arrive, so memory is bounded by the key rate × TTL.
type MemoryDeduper = dedupe.Memory

// NewMemoryDeduper returns an empty in-process Deduper. now may be nil
// (time.Now).
func NewMemoryDeduper(now func() time.Time) *MemoryDeduper { return dedupe.NewMemory(now) }
