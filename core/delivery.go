package core

import (
	"context"
	"time"
)

// DeliveryQueue is the durable retry queue of inbound deliveries a surface
// could not hand to the engine (deliver kept failing) and the platform will
// never redeliver (a Discord gateway event): instead of being dropped, the
// delivery waits here and is retried with backoff until its deadline. It
// lives with the journal (store/postgres, store/sqlite), so a queued
// delivery survives a restart and any replica may retry it. Every
// implementation passes core/deliverytest.
//
// A queued delivery holds the message as received (its text too) until it
// is delivered or given up; Ack deletes it.
//
// Times are the caller's: the queue compares the times it is given, so a
// test's clock drives it as well as the wall clock.
type DeliveryQueue interface {
	// Put queues d under (d.Platform, d.Key) unless a delivery is queued
	// under it already, in which case nothing changes (a second failure of
	// the same event does not reset its deadline).
	Put(ctx context.Context, d QueuedDelivery) error
	// Claim returns up to limit of platform's deliveries due at now
	// (NextAt <= now), oldest due first, and hides each from other claims
	// until now+lease: the claimer then Acks it or sets its next attempt
	// with Retry. A claimer that dies leaves it due again after lease.
	Claim(ctx context.Context, platform string, now time.Time, lease time.Duration, limit int) ([]QueuedDelivery, error)
	// Retry records a failed attempt of key: Attempts grows by one,
	// LastError is lastErr, and it is due again at next.
	Retry(ctx context.Context, platform, key string, next time.Time, lastErr string) error
	// Ack removes key: delivered, or given up at its deadline. Acking a key
	// that is not queued is not an error.
	Ack(ctx context.Context, platform, key string) error
	// Backlog counts platform's queued deliveries and reports when the
	// oldest was queued.
	Backlog(ctx context.Context, platform string) (DeliveryBacklog, error)
}

// QueuedDelivery is one inbound delivery waiting for a retry.
type QueuedDelivery struct {
	Platform string
	// Key is the surface's dedupe key of the delivery ("msg:<id>"): the
	// same key the live path claims, so a retry never doubles a message.
	Key      string
	Inbound  Inbound
	QueuedAt time.Time
	// Deadline is when the queue gives up on it (the approval TTL after it
	// was first received): a message that old is no longer answered.
	Deadline  time.Time
	NextAt    time.Time
	Attempts  int
	LastError string
}

// DeliveryBacklog is what a platform has queued.
type DeliveryBacklog struct {
	Queued int
	Oldest time.Time // QueuedAt of the oldest; zero when none
}
