package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/fold"
)

// Start-up and eviction keep the engine's memory and start-up time
// proportional to the work in flight, not to the journal (see
// docs/architecture.md, "Start-up and eviction"). Start folds only the
// channels the journal's tail (Journal.Unfinished) shows unfinished work
// in; a channel's cache is dropped after ChannelIdle without live work and
// folded again from the journal on its next touch.

// DefaultChannelIdle is how long an idle channel's cache stays in memory.
const DefaultChannelIdle = 10 * time.Minute

// unfinishedChannels returns, in order, the channels of tail (what
// Journal.Unfinished returned) that hold unfinished work as the fold sees
// it: a run that has not ended, a pending approval, or a failed run whose
// end notice was not recorded as posted.
func unfinishedChannels(tail []core.Command) ([]core.ChannelKey, error) {
	type runKey struct {
		ch  core.ChannelKey
		run string
	}
	var out []core.ChannelKey
	add := func(ch core.ChannelKey) {
		if len(out) == 0 || out[len(out)-1] != ch {
			out = append(out, ch)
		}
	}
	notices := map[runKey]string{} // failed run → effect id of its end notice
	flush := func(ch core.ChannelKey) {
		for k := range notices {
			if k.ch == ch {
				add(ch)
				delete(notices, k)
			}
		}
	}
	var cur core.ChannelKey
	for _, c := range tail {
		if c.Channel() != cur {
			flush(cur)
			cur = c.Channel()
		}
		k := runKey{c.Channel(), c.Run()}
		switch c.Kind() {
		case core.KindRunStarted, core.KindApprovalRequested:
			add(c.Channel())
		case core.KindRunFailed:
			p, err := core.Decode[*core.RunFailed](c)
			if err != nil {
				return nil, fmt.Errorf("read unfinished work: %w", err)
			}
			// The same rule as the channel fold's endNotice.
			if p.Status == core.RunBroken || p.Status == core.RunCancelled && p.Cause != fold.CauseSuperseded {
				notices[k] = core.EffectID(c.Channel(), c.Seq(), 0)
			}
		case core.KindMessagePosted:
			want, ok := notices[k]
			if !ok {
				continue
			}
			p, err := core.Decode[*core.MessagePosted](c)
			if err != nil {
				return nil, fmt.Errorf("read unfinished work: %w", err)
			}
			if p.EffectID == want {
				delete(notices, k)
			}
		default:
		}
	}
	flush(cur)
	return out, nil
}

// channelsWithWork lists the channels with unfinished work, from the
// journal's tail.
func (e *Engine) channelsWithWork(ctx context.Context) ([]core.ChannelKey, error) {
	tail, err := e.j.Unfinished(ctx)
	if err != nil {
		return nil, fmt.Errorf("read unfinished work: %w", err)
	}
	return unfinishedChannels(tail)
}

// channelIdle is the configured idle time before eviction (0: never).
func (e *Engine) channelIdle() time.Duration {
	switch {
	case e.cfg.ChannelIdle < 0:
		return 0
	case e.cfg.ChannelIdle == 0:
		return DefaultChannelIdle
	}
	return e.cfg.ChannelIdle
}

// startEviction starts the goroutine that evicts idle channels, once.
func (e *Engine) startEviction() {
	idle := e.channelIdle()
	if idle == 0 {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.evicting || e.closed {
		return
	}
	e.evicting = true
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		t := time.NewTicker(min(max(idle/4, time.Second), time.Minute))
		defer t.Stop()
		for {
			select {
			case <-e.runCtx.Done():
				return
			case <-t.C:
				e.evictIdle()
			}
		}
	}()
}

// evictIdle drops the cache of every channel untouched for the idle time
// that has no live work, and returns how many it dropped. Dropping resets
// the view in place rather than removing it from e.channels: whoever still
// holds the pointer folds it again from the journal on its next use, so
// there is never a second view of one channel (which would break the
// check-then-append atomicity the view's lock gives).
func (e *Engine) evictIdle() int {
	idle := e.channelIdle()
	if idle == 0 {
		return 0
	}
	now := e.now()
	e.chMu.Lock()
	var stale []*chanView
	for _, v := range e.channels {
		if now.Sub(v.touched) >= idle && v.borrows == 0 {
			stale = append(stale, v)
		}
	}
	e.chMu.Unlock()
	n := 0
	var released []core.ChannelKey
	for _, v := range stale {
		if e.evict(v, now, idle) {
			n++
			released = append(released, v.key)
		}
	}
	// An idle channel's lease goes back too, so channels spread over the
	// replicas that have work for them instead of staying with the first.
	e.releaseChannels(released)
	return n
}

// evict resets v if it is still idle. Holding v.mu throughout means no
// drive can pick up pointers into the old fold in between: a drive needs a
// mailbox (checked here) and v.mu to read anything.
func (e *Engine) evict(v *chanView, now time.Time, idle time.Duration) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	if !v.loaded || !v.idleLocked() {
		return false
	}
	e.chMu.Lock()
	touched := v.touched
	e.chMu.Unlock()
	if now.Sub(touched) < idle {
		return false
	}
	e.mu.Lock()
	for k := range e.threads {
		if k.ch == v.key {
			e.mu.Unlock()
			return false // queued or running work
		}
	}
	e.mu.Unlock()
	v.reset()
	return true
}

// idleLocked reports whether the fold holds nothing live: every run ended
// with its end notice posted, no approval pending. Callers hold v.mu.
func (v *chanView) idleLocked() bool {
	for _, r := range v.fold.Runs() {
		if !r.Status.Terminal() || r.EndNotice != "" {
			return false
		}
	}
	for _, a := range v.fold.Approvals() {
		if a.Pending() {
			return false
		}
	}
	return true
}

// reset empties the fold, as newChanView makes it; the next use loads it
// again from the journal. Callers hold v.mu. TestChanViewResetIsFresh
// checks that every field is covered.
func (v *chanView) reset() {
	v.loaded, v.seq = false, 0
	v.foreign, v.woke = 0, 0
	v.fold = fold.NewChannel(v.key)
	v.ck = &viewCheckpoint{cfg: v.ck.cfg}
}

// isLoaded reports whether v holds a fold (false after eviction).
func (v *chanView) isLoaded() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.loaded
}

// viewLoaded reports whether this process holds ch's fold now.
func (e *Engine) viewLoaded(ch core.ChannelKey) bool {
	e.chMu.Lock()
	v := e.channels[ch]
	e.chMu.Unlock()
	if v == nil {
		return false
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.loaded
}
