package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/fold"
)

// Channel ownership (ARCHITECTURE.md section 9). Any replica may receive an
// event or a click: it journals it with an append at the head it folded
// (AppendAt), so its decision holds against the journal, not its cache.
// Only the replica holding a channel's lease drives it: resumes and drives
// its runs, expires its approvals, posts for it. Its appends carry the
// lease's fence, so a replica that lost the lease cannot write. The owner
// learns of other replicas' appends through Wake (the store's notifications)
// and a replica that dies lets its leases lapse; the others' sweep claims
// lapsed channels and resumes them from the journal.
//
// With no Leases configured (embedded mode), the engine owns every channel.

// ownership is the engine's share of the lease table.
type ownership struct {
	leases core.Leases
	holder string
	ttl    time.Duration

	mu        sync.Mutex
	owned     map[core.ChannelKey]core.Fence
	until     map[core.ChannelKey]time.Time // local time each lease surely lasts until (actable.go)
	renewedAt time.Time                     // last successful renewal (or start)
	renewErr  error
	peers     int             // other live replicas at the last presence check; -1 not known
	unrun     map[string]bool // tool calls mayAct kept from running (actable.go)
}

func newOwnership(l core.Leases, holder string, ttl time.Duration) *ownership {
	if ttl <= 0 {
		ttl = core.DefaultLeaseTTL
	}
	// A random suffix always: a restarted process, or two replicas given
	// the same name by mistake, never pass for one holder.
	holder = core.ReplicaName(holder)
	return &ownership{leases: l, holder: holder, ttl: ttl, owned: map[core.ChannelKey]core.Fence{}, until: map[core.ChannelKey]time.Time{},
		renewedAt: time.Now(), peers: -1, unrun: map[string]bool{}}
}

type fenceKey struct{}

// withFence marks ctx as driving under f: appends to f's channel made with
// it are fenced.
func withFence(ctx context.Context, f *core.Fence) context.Context {
	if f == nil {
		return ctx
	}
	return context.WithValue(ctx, fenceKey{}, f)
}

// fenceFor returns the fence ctx drives ch under, if any.
func fenceFor(ctx context.Context, ch core.ChannelKey) *core.Fence {
	f, _ := ctx.Value(fenceKey{}).(*core.Fence)
	if f == nil || f.Name != core.ChannelLease(ch) {
		return nil
	}
	return f
}

// owns reports whether this replica drives ch, and under which fence (nil
// in embedded mode).
func (e *Engine) owns(ch core.ChannelKey) (*core.Fence, bool) {
	o := e.own
	if o == nil {
		return nil, true
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	f, ok := o.owned[ch]
	if !ok {
		return nil, false
	}
	return &f, true
}

// claim takes ch's lease if it is free, released or lapsed. fresh is true
// when this call took it (the caller then resumes what the channel left
// unfinished).
func (e *Engine) claim(ctx context.Context, ch core.ChannelKey) (ok, fresh bool, err error) {
	o := e.own
	if o == nil {
		return true, false, nil
	}
	if _, held := e.owns(ch); held {
		return true, false, nil
	}
	start := time.Now()
	f, ok, err := o.leases.Acquire(ctx, core.ChannelLease(ch), o.holder, o.ttl)
	if err != nil || !ok {
		return false, false, err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, held := o.owned[ch]; held {
		return true, false, nil
	}
	o.owned[ch], o.until[ch] = f, start.Add(o.ttl)
	e.log.Debug("channel claimed", "channel", string(ch), "fence", f.Token)
	return true, true, nil
}

// lose forgets ch: its lease passed to another replica.
func (e *Engine) lose(ch core.ChannelKey, why string) {
	o := e.own
	if o == nil {
		return
	}
	o.mu.Lock()
	_, had := o.owned[ch]
	delete(o.owned, ch)
	delete(o.until, ch)
	o.mu.Unlock()
	if had {
		e.log.Warn("channel lease lost; another replica drives the channel", "channel", string(ch), "why", why)
	}
}

// claimThenLocked claims ch off the caller's goroutine (enqueue holds e.mu) and
// hands j to the mailbox if this replica got the channel. When another
// replica owns it, nothing is lost: the journal has what j was for, and the
// owner hears of it through Wake. Callers hold e.mu.
func (e *Engine) claimThenLocked(k threadKey, j job) {
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		ctx := e.runCtx
		ok, fresh, err := e.claim(ctx, k.ch)
		if err != nil {
			if ctx.Err() == nil {
				e.log.Warn("claim channel failed; the sweep retries", "channel", string(k.ch), "error", err)
			}
			return
		}
		if !ok {
			return
		}
		if fresh {
			if _, err := e.resumeChannel(ctx, k.ch); err != nil && ctx.Err() == nil {
				e.log.Warn("resume claimed channel", "channel", string(k.ch), "error", err)
			}
		}
		e.enqueue(k, j)
	}()
}

// OwnedChannels is how many channels this replica drives now (embedded:
// every loaded channel).
func (e *Engine) OwnedChannels() int {
	if e.own == nil {
		e.chMu.Lock()
		defer e.chMu.Unlock()
		return len(e.channels)
	}
	e.own.mu.Lock()
	defer e.own.mu.Unlock()
	return len(e.own.owned)
}

// LeaseHealth reports whether this replica's channel leases were renewed
// within their TTL (nil in embedded mode): /readyz uses it.
func (e *Engine) LeaseHealth() error {
	o := e.own
	if o == nil {
		return nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if since := time.Since(o.renewedAt); since > o.ttl {
		return fmt.Errorf("channel leases not renewed for %s: %v", since.Round(time.Second), o.renewErr)
	}
	return nil
}

// Replica is this engine's holder id in the lease table.
func (e *Engine) Replica() string {
	if e.own == nil {
		return ""
	}
	return e.own.holder
}

// keepLeases renews this replica's leases and sweeps lapsed ones until ctx
// ends; on the way out it releases every lease it holds, so the other
// replicas take the channels over at once instead of after the TTL.
func (e *Engine) keepLeases(ctx context.Context) {
	o := e.own
	tick := time.NewTicker(o.ttl / 4)
	defer tick.Stop()
	for n := 1; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		e.renewLeases(ctx)
		e.countPeers(ctx)
		e.sweepLapsed(ctx)
		if n%4 == 0 {
			e.sweepUnowned(ctx)
		}
	}
}

// sweepUnowned claims channels whose unfinished work nobody drives: a
// lease released (drain, eviction) or never taken (a claim that failed on
// a database error) just as another replica journaled work there. Lapsed
// leases are swept more often by sweepLapsed; this is the backstop, once
// per TTL.
func (e *Engine) sweepUnowned(ctx context.Context) {
	chs, err := e.channelsWithWork(ctx)
	if err != nil {
		if ctx.Err() == nil {
			e.log.Warn("sweep unowned channels", "error", err)
		}
		return
	}
	for _, ch := range chs {
		if _, held := e.owns(ch); held {
			continue
		}
		e.takeOver(ctx, ch, "an unowned channel with unfinished work")
	}
}

// takeOver claims ch for a sweep and resumes its unfinished work; what
// names the channel in the logs ("a lapsed channel").
func (e *Engine) takeOver(ctx context.Context, ch core.ChannelKey, what string) {
	ok, fresh, err := e.claim(ctx, ch)
	if err != nil || !ok || !fresh {
		return
	}
	n, err := e.resumeChannel(ctx, ch)
	if err != nil {
		if ctx.Err() == nil {
			e.log.Warn("resume "+what, "channel", string(ch), "error", err)
		}
		return
	}
	e.log.Info("took over "+what, "channel", string(ch), "unfinished_runs", n)
}

func (e *Engine) renewLeases(ctx context.Context) {
	o := e.own
	o.mu.Lock()
	names := make([]string, 0, len(o.owned))
	for ch := range o.owned {
		names = append(names, core.ChannelLease(ch))
	}
	o.mu.Unlock()
	start := time.Now()
	held, err := o.leases.Renew(ctx, o.holder, o.ttl, names...)
	o.mu.Lock()
	if err != nil {
		o.renewErr = err
		o.mu.Unlock()
		if ctx.Err() == nil {
			e.log.Warn("renew channel leases failed; appends stay fenced", "channels", len(names), "error", err)
		}
		return
	}
	o.renewedAt, o.renewErr = time.Now(), nil
	for _, n := range held {
		ch := core.ChannelKey(strings.TrimPrefix(n, core.ChannelLeasePrefix))
		if _, ok := o.owned[ch]; ok {
			o.until[ch] = start.Add(o.ttl)
		}
	}
	o.mu.Unlock()
	for _, n := range names {
		if !slices.Contains(held, n) {
			e.lose(core.ChannelKey(strings.TrimPrefix(n, core.ChannelLeasePrefix)), "renewal found another holder")
		}
	}
}

// sweepLapsed claims the channels of replicas that died (their leases
// lapsed) and resumes what they left unfinished.
func (e *Engine) sweepLapsed(ctx context.Context) {
	names, err := e.own.leases.Lapsed(ctx, core.ChannelLeasePrefix)
	if err != nil {
		if ctx.Err() == nil {
			e.log.Warn("list lapsed channel leases", "error", err)
		}
		return
	}
	for _, n := range names {
		e.takeOver(ctx, core.ChannelKey(strings.TrimPrefix(n, core.ChannelLeasePrefix)), "a lapsed channel")
	}
}

// releaseChannels gives up the leases of chs (evicted idle channels).
func (e *Engine) releaseChannels(chs []core.ChannelKey) {
	o := e.own
	if o == nil || len(chs) == 0 {
		return
	}
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
		return
	}
	ctx, cancel := context.WithTimeout(e.runCtx, 5*time.Second)
	defer cancel()
	if err := o.leases.Release(ctx, o.holder, names...); err != nil && ctx.Err() == nil {
		e.log.Warn("release idle channel leases; they lapse after their TTL instead", "channels", len(names), "error", err)
	}
}

// releaseLeases gives up every lease this replica holds (Close).
func (e *Engine) releaseLeases(ctx context.Context) {
	o := e.own
	if o == nil {
		return
	}
	o.mu.Lock()
	names := make([]string, 0, len(o.owned)+1)
	for ch := range o.owned {
		names = append(names, core.ChannelLease(ch))
	}
	names = append(names, o.presence())
	clear(o.owned)
	clear(o.until)
	o.mu.Unlock()
	if err := o.leases.Release(ctx, o.holder, names...); err != nil {
		e.log.Warn("release channel leases; they lapse after their TTL instead", "channels", len(names), "error", err)
	}
}

// Wake tells the engine that the journal of ch has commands up to seq that
// another replica may have appended (ch empty: anything may have changed,
// e.g. after the notification connection came back). The owner folds them
// and drives what they concern; a replica that does not own ch ignores it.
func (e *Engine) Wake(ctx context.Context, ch core.ChannelKey, seq uint64) {
	if ch == "" {
		e.chMu.Lock()
		chs := make([]core.ChannelKey, 0, len(e.channels))
		for k := range e.channels {
			chs = append(chs, k)
		}
		e.chMu.Unlock()
		for _, k := range chs {
			e.Wake(ctx, k, 0)
		}
		return
	}
	if _, ok := e.owns(ch); !ok {
		return
	}
	v := e.view(ch)
	type drive struct{ id, thread string }
	var drives []drive
	var pending []*fold.Approval
	var ended []string
	e.mu.Lock()
	inflight := make([]string, 0, len(e.inflight))
	for id := range e.inflight {
		inflight = append(inflight, id)
	}
	e.mu.Unlock()
	quiet := false
	err := v.withFresh(ctx, seq, func() {
		if quiet = v.foreign == v.woke; quiet {
			return // only this replica's own appends since the last wake
		}
		v.woke = v.foreign
		for _, id := range inflight {
			if r := v.fold.Run(id); r != nil && r.Status.Terminal() {
				ended = append(ended, id) // a `cancel` another replica journaled
			}
		}
		// Whatever path folded them (this wake, or a replanned append that
		// caught up first), the channel's live runs are what to drive.
		for id := range v.fold.LiveRuns() {
			r := v.fold.Run(id)
			switch r.Status {
			case core.RunQueued, core.RunWorking:
				drives = append(drives, drive{id, r.Thread})
			case core.RunWaitingApproval:
				for _, a := range v.fold.Approvals() {
					if a.Run == id && a.Pending() {
						cp := *a
						pending = append(pending, &cp)
					}
				}
			}
		}
	})
	if err != nil {
		if ctx.Err() == nil {
			e.log.Warn("wake: catch up channel", "channel", string(ch), "error", err)
		}
		return
	}
	if quiet {
		return
	}
	for _, id := range ended {
		e.interrupt(id)
	}
	for _, a := range pending {
		e.armExpiry(ch, a.Scope.Thread, a.ID, a.ExpiresAt)
	}
	for _, d := range drives {
		// Queued behind a drive in progress too: that drive may have
		// read the run before these commands arrived.
		e.enqueue(threadKey{ch, d.thread}, job{run: d.id})
	}
}

// withFresh runs fn under the lock on the view after folding what the
// journal holds past v.seq, when it may be ahead of seq (0: it may always
// be: another replica may have appended since the view was folded).
func (v *chanView) withFresh(ctx context.Context, seq uint64, fn func()) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	folded := v.loaded
	if err := v.load(ctx); err != nil {
		return err
	}
	switch {
	case !folded:
		// Folded just now: fresh, and anything in it may be another
		// replica's (Wake must not take it for this replica's own).
		v.foreign++
	case seq == 0 || seq > v.seq:
		if err := v.catchUp(ctx); err != nil {
			return err
		}
	}
	fn()
	return nil
}

// errLeaseLost ends a drive whose channel passed to another replica.
var errLeaseLost = errors.New("channel lease lost")
