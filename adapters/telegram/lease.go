package telegram

import "context"

// Lease elects the one process that polls a bot token: Telegram allows one
// getUpdates caller per token (a second gets 409 Conflict, and the two
// would steal each other's updates).
//
// Acquire blocks until the caller holds the lease named name, or ctx ends.
// The returned context ends when the lease is lost (expired, taken over) or
// ctx ends; the poller stops polling at once when it does. release gives the
// lease up and must be called exactly once.
type Lease interface {
	Acquire(ctx context.Context, name string) (held context.Context, release func(), err error)
}

// LocalLease is always held: correct for exactly one process per token. It
// is the default; several replicas polling one token need a shared lease
// (the ownership work, issue 11, provides one) or webhook mode.
type LocalLease struct{}

// Acquire implements Lease.
func (LocalLease) Acquire(ctx context.Context, _ string) (context.Context, func(), error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	held, cancel := context.WithCancel(ctx)
	return held, cancel, nil
}
