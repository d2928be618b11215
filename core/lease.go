package core

import (
	"context"
	"time"
)

// Fence is a lease as the journal checks it: an AppendAt carrying a fence
// is refused (ErrFenced) once the lease has changed holder since the fence
// was issued.
type Fence struct {
	Name  string // the lease, e.g. "channel:slack/T1/C1"
	Token int64  // grows every time the lease changes holder
}

// Leases is the lease table replicas share. At most one holder has a name
// at a time; a holder that stops renewing loses it ttl after its last
// renewal. It lives with the journal (store/postgres, store/sqlite), not in
// Redis, so that AppendAt can check a fence in the same transaction as the
// append, and a Redis restart can never hand a channel to two replicas.
// Every implementation passes the lease part of core/journaltest.
type Leases interface {
	// Acquire takes name for holder for ttl when it is free, released or
	// lapsed, or extends it when holder has it already. It returns false
	// (and no error) when another holder has it. The fence's token is
	// unchanged while the same holder keeps the lease and grows whenever it
	// passes to a new holder.
	Acquire(ctx context.Context, name, holder string, ttl time.Duration) (Fence, bool, error)
	// Renew extends each of names that holder still has (lapsed or not, as
	// long as nobody took it over) and returns those; the others are lost.
	Renew(ctx context.Context, holder string, ttl time.Duration, names ...string) ([]string, error)
	// Release gives names up, so another holder can take them at once.
	Release(ctx context.Context, holder string, names ...string) error
	// Lapsed lists the leases under prefix whose holder stopped renewing
	// without releasing them (it crashed, or lost the database): what they
	// guarded may be unfinished.
	Lapsed(ctx context.Context, prefix string) ([]string, error)
	// Live lists the leases under prefix that a holder has and renewed
	// within their ttl.
	Live(ctx context.Context, prefix string) ([]string, error)
}

// Channel leases. A channel is driven (its runs resumed, driven and
// posted, its approvals expired) only by the replica holding its lease.
const (
	// ChannelLeasePrefix prefixes a channel lease's name.
	ChannelLeasePrefix = "channel:"
	// DefaultLeaseTTL is how long a dead replica's channels wait before
	// another replica resumes them.
	DefaultLeaseTTL = 10 * time.Second
)

// ChannelLease is the lease name of ch.
func ChannelLease(ch ChannelKey) string { return ChannelLeasePrefix + string(ch) }
