package engine

import (
	"context"
	"time"

	"github.com/marlowe-bot/marlowe/core"
)

// typist shows a surface's typing indicator (core.Typing) for one drive
// while a model call or a tool runs. It belongs to the driver: busy is
// called on the driver goroutine, and the refresh goroutine it starts is
// joined by the func busy returns, so no refresh outlives the work (nor the
// drive, nor Close).
type typist struct {
	t     core.Typing
	every time.Duration
	scope core.Scope
	e     *Engine
	run   string
	// last is when the indicator was last asked for. Only the refresh
	// goroutine writes it, and only while busy; the driver reads it after
	// joining that goroutine.
	last time.Time
}

// newTypist returns nil when the surface has no typing indicator.
func newTypist(e *Engine, s core.Surface, rs *RunReplay) *typist {
	t, ok := s.(core.Typing)
	if !ok {
		return nil
	}
	every := t.TypingEvery()
	if every <= 0 {
		every = 4 * time.Second
	}
	return &typist{t: t, every: every, scope: rs.Scope, e: e, run: rs.ID}
}

// busy shows the indicator until the returned func is called (at once,
// unless it was asked for less than every ago), refreshing it every
// every. The returned func stops the refreshing and waits for it.
func (t *typist) busy(ctx context.Context) (stop func()) {
	if t == nil {
		return func() {}
	}
	tctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go t.refresh(tctx, done)
	return func() {
		cancel()
		<-done
	}
}

func (t *typist) refresh(ctx context.Context, done chan<- struct{}) {
	defer close(done)
	wait := t.every - time.Since(t.last)
	for {
		if wait <= 0 {
			t.last = time.Now()
			cctx, cancel := context.WithTimeout(ctx, t.every)
			err := t.t.Typing(cctx, t.scope)
			cancel()
			if err != nil && ctx.Err() == nil {
				t.e.log.DebugContext(ctx, "typing indicator failed", "run", t.run, "channel", t.scope.Channel, "error", err)
			}
			wait = t.every
		}
		tm := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			tm.Stop()
			return
		case <-tm.C:
			wait = 0
		}
	}
}
