package engine

import (
	"context"
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

// owns reports whether this replica drives ch, and under which fence (nil
// in embedded mode).
func (e *Engine) owns(ch core.ChannelKey) (*core.Fence, bool) {
	if e.own == nil {
		return nil, true
	}
	return e.own.Owns(ch)
}

// claim takes ch's lease if it is free, released or lapsed. fresh is true
// when this call took it (the caller then resumes what the channel left
// unfinished).
func (e *Engine) claim(ctx context.Context, ch core.ChannelKey) (ok, fresh bool, err error) {
	if e.own == nil {
		return true, false, nil
	}
	f, ok, fresh, err := e.own.Claim(ctx, ch)
	if fresh {
		e.log.DebugContext(ctx, "channel claimed", "channel", string(ch), "fence", f.Token)
	}
	return ok, fresh, err
}

// claimBeforeJournaling claims ch, when nobody holds it, before ingress
// journals a routed message there. A run journaled by the lease holder is
// not in doubt when that holder drives it first: no other replica can have
// posted for it. A run journaled before the claim might have been (the
// previous owner, woken by the append, may have posted and died), so the
// claim after the append resumes it as in doubt, and each of its posts is
// first looked for on the platform (Slack paces those reads to one a
// second: claiming after the append made every channel's first run wait
// behind them). A claim that fails changes nothing: the claim after the
// append (enqueue) and the sweeps still run. A channel found held by
// another replica is not asked about again for a quarter of the TTL, so
// routed messages there do not pay a query each before their ack.
func (e *Engine) claimBeforeJournaling(ctx context.Context, ch core.ChannelKey) {
	if e.own == nil {
		return
	}
	if _, held := e.owns(ch); held {
		return
	}
	now := e.now()
	e.elseMu.Lock()
	until, elsewhere := e.heldElsewhere[ch]
	e.elseMu.Unlock()
	if elsewhere && now.Before(until) {
		return
	}
	ok, fresh, err := e.claim(ctx, ch)
	if err != nil || !ok {
		if err == nil {
			e.elseMu.Lock()
			e.heldElsewhere[ch] = now.Add(e.own.TTL() / 4)
			e.elseMu.Unlock()
		}
		return
	}
	e.elseMu.Lock()
	delete(e.heldElsewhere, ch)
	e.elseMu.Unlock()
	if fresh {
		if _, err := e.resumeChannel(e.runCtx, ch); err != nil && ctx.Err() == nil {
			e.log.WarnContext(ctx, "resume claimed channel", "channel", string(ch), "error", err)
		}
	}
}

// lose forgets ch: its lease passed to another replica.
func (e *Engine) lose(ch core.ChannelKey, why string) {
	if e.own != nil && e.own.Lose(ch) {
		if m := e.ops(); m != nil {
			m.LeaseLost()
		}
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
	return e.own.Owned()
}

// LeaseHealth reports whether this replica's channel leases were renewed
// within their TTL (nil in embedded mode): /readyz uses it.
func (e *Engine) LeaseHealth() error {
	if e.own == nil {
		return nil
	}
	return e.own.Health()
}

// Replica is this engine's holder id in the lease table.
func (e *Engine) Replica() string {
	if e.own == nil {
		return ""
	}
	return e.own.Holder()
}

// keepLeases renews this replica's leases and sweeps lapsed ones until ctx
// ends; on the way out it releases every lease it holds, so the other
// replicas take the channels over at once instead of after the TTL.
func (e *Engine) keepLeases(ctx context.Context) {
	tick := time.NewTicker(e.own.TTL() / 4)
	defer tick.Stop()
	for n := 1; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		e.renewLeases(ctx)
		e.own.CountPeers(ctx)
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
			e.log.WarnContext(ctx, "sweep unowned channels", "error", err)
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
			e.log.WarnContext(ctx, "resume "+what, "channel", string(ch), "error", err)
		}
		return
	}
	e.log.InfoContext(ctx, "took over "+what, "channel", string(ch), "unfinished_runs", n)
}

func (e *Engine) renewLeases(ctx context.Context) {
	lost, asked, err := e.own.Renew(ctx)
	if err != nil {
		if ctx.Err() == nil {
			e.log.WarnContext(ctx, "renew channel leases failed; appends stay fenced", "channels", asked, "error", err)
		}
		return
	}
	for _, ch := range lost {
		e.lose(ch, "renewal found another holder")
	}
}

// sweepLapsed claims the channels of replicas that died (their leases
// lapsed) and resumes what they left unfinished.
func (e *Engine) sweepLapsed(ctx context.Context) {
	chs, err := e.own.Lapsed(ctx)
	if err != nil {
		if ctx.Err() == nil {
			e.log.WarnContext(ctx, "list lapsed channel leases", "error", err)
		}
		return
	}
	for _, ch := range chs {
		e.takeOver(ctx, ch, "a lapsed channel")
	}
}

// releaseChannels gives up the leases of chs (evicted idle channels).
func (e *Engine) releaseChannels(chs []core.ChannelKey) {
	if e.own == nil || len(chs) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(e.runCtx, 5*time.Second)
	defer cancel()
	if n, err := e.own.Release(ctx, chs); err != nil && ctx.Err() == nil {
		e.log.Warn("release idle channel leases; they lapse after their TTL instead", "channels", n, "error", err)
	}
}

// releaseLeases gives up every lease this replica holds (Close).
func (e *Engine) releaseLeases(ctx context.Context) {
	if e.own == nil {
		return
	}
	if n, err := e.own.ReleaseAll(ctx); err != nil {
		e.log.WarnContext(ctx, "release channel leases; they lapse after their TTL instead", "channels", n, "error", err)
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
			e.log.WarnContext(ctx, "wake: catch up channel", "channel", string(ch), "error", err)
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
