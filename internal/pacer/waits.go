package pacer

import (
	"context"
	"errors"
	"sync/atomic"
	"time"
)

// Waits reports how long each paced call waited, per method, to whoever set
// an observer (the metrics); the zero value reports to no one.
type Waits struct {
	f atomic.Pointer[func(method string, wait time.Duration)]
}

// Set installs the observer; nil removes it.
func (w *Waits) Set(f func(method string, wait time.Duration)) {
	if f == nil {
		w.f.Store(nil)
		return
	}
	w.f.Store(&f)
}

// Waited reports one call's wait.
func (w *Waits) Waited(method string, d time.Duration) {
	if f := w.f.Load(); f != nil {
		(*f)(method, d)
	}
}

// DecorateOrDrop sends a decoration through p now, or drops it (nil: a
// decoration not shown costs nothing) when key's budget has no room; one
// sent is reported to w as not having waited.
func DecorateOrDrop[K comparable](ctx context.Context, p *Pacer[K], w *Waits, method string, key K, fn func(context.Context) error) error {
	err := p.Decorate(ctx, key, fn)
	if errors.Is(err, ErrDropped) {
		return nil
	}
	if err == nil {
		w.Waited(method, 0)
	}
	return err
}
