package replica

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/marlowe-bot/marlowe/core"
)

// Ownership is one replica's share of the lease table (ARCHITECTURE.md
// section 9): which channels it drives, under which fences, and until when
// each lease surely lasts. It only keeps the books; the engine decides what
// to resume when a claim is fresh and what to stop when a lease is lost.
//
// A lease surely lasts until the start of its last successful acquire or
// renewal plus the TTL (the database set the expiry later than that).
type Ownership struct {
	leases core.Leases
	holder string
	ttl    time.Duration
	now    func() time.Time

	mu        sync.Mutex
	owned     map[core.ChannelKey]core.Fence
	until     map[core.ChannelKey]time.Time
	renewedAt time.Time // last successful renewal (or start)
	renewErr  error
	peers     int // other live replicas at the last presence check; -1 not known
}

// ErrLeaseLost ends a drive whose channel passed to another replica.
var ErrLeaseLost = errors.New("channel lease lost")

// ErrLeaseStale refuses an effect whose lease may have lapsed: a post or a
// tool call reaches a platform that knows no fence, so a replica cut off
// from the database must stop acting before another may have taken over.
var ErrLeaseStale = errors.New("channel lease not renewed in time (the database is unreachable?): not acting on the platform, another replica may have taken the channel over")

// NewOwnership keeps the books for one replica named holder (a random
// suffix is added, so a restarted process, or two replicas given the same
// name by mistake, never pass for one holder). ttl <= 0 means
// core.DefaultLeaseTTL.
func NewOwnership(l core.Leases, holder string, ttl time.Duration, opts ...Option) *Ownership {
	if ttl <= 0 {
		ttl = core.DefaultLeaseTTL
	}
	o := &Ownership{leases: l, holder: holderName(holder), ttl: ttl, now: time.Now,
		owned: map[core.ChannelKey]core.Fence{}, until: map[core.ChannelKey]time.Time{}, peers: -1}
	for _, opt := range opts {
		opt(o)
	}
	o.renewedAt = o.now()
	return o
}

// Option configures an Ownership.
type Option func(*Ownership)

// WithClock makes the books read time from now (tests; default time.Now).
func WithClock(now func() time.Time) Option { return func(o *Ownership) { o.now = now } }

// Holder is this replica's id in the lease table.
func (o *Ownership) Holder() string { return o.holder }

// TTL is the lease time to live.
func (o *Ownership) TTL() time.Duration { return o.ttl }

// Owns reports whether this replica holds ch's lease, and under which fence.
func (o *Ownership) Owns(ch core.ChannelKey) (*core.Fence, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	f, ok := o.owned[ch]
	if !ok {
		return nil, false
	}
	return &f, true
}

// Owned is how many channels this replica holds.
func (o *Ownership) Owned() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.owned)
}

// Claim takes ch's lease if it is free, released or lapsed. fresh is true
// when this call took it (the caller then resumes what the channel left
// unfinished); a lease already held is ok and not fresh.
func (o *Ownership) Claim(ctx context.Context, ch core.ChannelKey) (f core.Fence, ok, fresh bool, err error) {
	if cur, held := o.Owns(ch); held {
		return *cur, true, false, nil
	}
	start := o.now()
	f, ok, err = o.leases.Acquire(ctx, core.ChannelLease(ch), o.holder, o.ttl)
	if err != nil || !ok {
		return core.Fence{}, false, false, err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if cur, held := o.owned[ch]; held {
		return cur, true, false, nil
	}
	o.owned[ch], o.until[ch] = f, start.Add(o.ttl)
	return f, true, true, nil
}

// Lose forgets ch (its lease passed to another replica) and reports
// whether it was held.
func (o *Ownership) Lose(ch core.ChannelKey) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	_, had := o.owned[ch]
	delete(o.owned, ch)
	delete(o.until, ch)
	return had
}

// Renew renews every lease held. It returns the channels whose renewal
// found another holder (the caller loses them) and how many were asked.
func (o *Ownership) Renew(ctx context.Context) (lost []core.ChannelKey, asked int, err error) {
	o.mu.Lock()
	names := make([]string, 0, len(o.owned))
	for ch := range o.owned {
		names = append(names, core.ChannelLease(ch))
	}
	o.mu.Unlock()
	start := o.now()
	held, err := o.leases.Renew(ctx, o.holder, o.ttl, names...)
	o.mu.Lock()
	if err != nil {
		o.renewErr = err
		o.mu.Unlock()
		return nil, len(names), err
	}
	o.renewedAt, o.renewErr = o.now(), nil
	for _, n := range held {
		ch := leaseChannel(n)
		if _, held := o.owned[ch]; held {
			o.until[ch] = start.Add(o.ttl)
		}
	}
	o.mu.Unlock()
	for _, n := range names {
		if !slices.Contains(held, n) {
			lost = append(lost, leaseChannel(n))
		}
	}
	return lost, len(names), nil
}

// Lapsed lists the channels whose leases lapsed (their replica died).
func (o *Ownership) Lapsed(ctx context.Context) ([]core.ChannelKey, error) {
	names, err := o.leases.Lapsed(ctx, core.ChannelLeasePrefix)
	if err != nil {
		return nil, err
	}
	chs := make([]core.ChannelKey, len(names))
	for i, n := range names {
		chs[i] = leaseChannel(n)
	}
	return chs, nil
}

// Release gives up the leases of chs this replica holds.
func (o *Ownership) Release(ctx context.Context, chs []core.ChannelKey) (released int, err error) {
	var names []string
	o.mu.Lock()
	for _, ch := range chs {
		if _, ok := o.owned[ch]; ok {
			delete(o.owned, ch)
			delete(o.until, ch)
			names = append(names, core.ChannelLease(ch))
		}
	}
	o.mu.Unlock()
	if len(names) == 0 {
		return 0, nil
	}
	return len(names), o.leases.Release(ctx, o.holder, names...)
}

// ReleaseAll gives up every lease held, presence included (a clean stop:
// the other replicas take the channels over at once instead of after the
// TTL).
func (o *Ownership) ReleaseAll(ctx context.Context) (released int, err error) {
	o.mu.Lock()
	names := make([]string, 0, len(o.owned)+1)
	for ch := range o.owned {
		names = append(names, core.ChannelLease(ch))
	}
	names = append(names, o.presence())
	clear(o.owned)
	clear(o.until)
	o.mu.Unlock()
	return len(names), o.leases.Release(ctx, o.holder, names...)
}

// Health reports whether the leases were renewed within their TTL.
func (o *Ownership) Health() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if since := o.now().Sub(o.renewedAt); since > o.ttl {
		return fmt.Errorf("channel leases not renewed for %s: %v", since.Round(time.Second), o.renewErr)
	}
	return nil
}

// MayAct reports whether a drive under fence f may act on the platform
// now: ErrLeaseLost when the channel passed to another replica (or f is
// not its current fence), ErrLeaseStale when less than a quarter of the
// TTL surely remains (the margin for the effect itself; renewals every
// TTL/4 keep a healthy replica far from it).
func (o *Ownership) MayAct(f core.Fence) error {
	ch := leaseChannel(f.Name)
	o.mu.Lock()
	cur, owned := o.owned[ch]
	until := o.until[ch]
	o.mu.Unlock()
	if !owned || cur.Token != f.Token {
		return fmt.Errorf("%w: %s", ErrLeaseLost, ch)
	}
	if until.Sub(o.now()) < o.ttl/4 {
		return fmt.Errorf("channel %s: %w", ch, ErrLeaseStale)
	}
	return nil
}

// CountPeers renews this replica's presence lease and counts the other
// live replicas. On a database error the count stays as it was.
func (o *Ownership) CountPeers(ctx context.Context) {
	if _, _, err := o.leases.Acquire(ctx, o.presence(), o.holder, o.ttl); err != nil {
		return
	}
	live, err := o.leases.Live(ctx, core.PresencePrefix)
	if err != nil {
		return
	}
	n := 0
	for _, name := range live {
		if name != o.presence() {
			n++
		}
	}
	o.mu.Lock()
	o.peers = n
	o.mu.Unlock()
}

// Alone reports whether no other replica was alive at the last presence
// check (false when not known yet).
func (o *Ownership) Alone() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.peers == 0
}

func (o *Ownership) presence() string { return core.PresencePrefix + o.holder }

func leaseChannel(name string) core.ChannelKey {
	return core.ChannelKey(strings.TrimPrefix(name, core.ChannelLeasePrefix))
}

type fenceKey struct{}

// WithFence marks ctx as driving under f: appends to f's channel made with
// it are fenced, and effects are checked against it (MayAct).
func WithFence(ctx context.Context, f *core.Fence) context.Context {
	if f == nil {
		return ctx
	}
	return context.WithValue(ctx, fenceKey{}, f)
}

// FenceOf returns the fence ctx drives under, if any.
func FenceOf(ctx context.Context) *core.Fence {
	f, _ := ctx.Value(fenceKey{}).(*core.Fence)
	return f
}

// FenceFor returns the fence ctx drives ch under, if any.
func FenceFor(ctx context.Context, ch core.ChannelKey) *core.Fence {
	f := FenceOf(ctx)
	if f == nil || f.Name != core.ChannelLease(ch) {
		return nil
	}
	return f
}
