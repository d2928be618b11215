package intent

import (
	"context"
	"fmt"
	"iter"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/marlowe-bot/marlowe/core"
)

// Filter is the intent filter the ingress calls for every normalised event:
// it reads the event's windows from the store (at most one call, none when
// rules 1 to 5 decide), applies Decide at the clock's time and counts the
// decision by reason. It is safe for concurrent use.
//
// Privacy: an ignored message leaves no trace here. The filter never logs,
// stores or counts anything about a message beyond one increment of its
// reason's counter; the only thing it logs is a window-store failure, with
// the channel key and never the text, author or message id.
type Filter struct {
	store WindowStore
	now   func() time.Time
	log   *slog.Logger

	counts      [reasonEnd]atomic.Uint64
	storeErrors atomic.Uint64
}

var _ core.PostObserver = (*Filter)(nil)

// FilterOption configures a Filter.
type FilterOption func(*Filter)

// WithLogger sets where window-store failures are logged (default: nowhere).
func WithLogger(l *slog.Logger) FilterOption { return func(f *Filter) { f.log = l } }

// NewFilter returns a filter over store, reading time from clock (time.Now
// when nil).
func NewFilter(store WindowStore, clock func() time.Time, opts ...FilterOption) *Filter {
	if clock == nil {
		clock = time.Now
	}
	f := &Filter{store: store, now: clock}
	for _, o := range opts {
		o(f)
	}
	return f
}

// Decide decides one event. When the window store fails, the decision is
// ignore (no-window): the filter fails closed, and the error (wrapped, with
// the channel key) says why; the caller may retry.
func (f *Filter) Decide(ctx context.Context, ev core.Event) (Decision, error) {
	d, ok := decideStatic(&ev)
	if !ok {
		now := f.now()
		w, err := f.store.Windows(ctx, ev.Scope.Key(), ev.Scope.Thread)
		if err != nil {
			f.storeErrors.Add(1)
			d = decide(ReasonNoWindow)
			f.counts[d.Reason].Add(1)
			err = fmt.Errorf("intent: read windows of %s: %w", ev.Scope.Key(), err)
			if f.log != nil {
				f.log.LogAttrs(ctx, slog.LevelWarn, "intent window store failed; message ignored",
					slog.String("channel", string(ev.Scope.Key())), slog.String("error", err.Error()))
			}
			return d, err
		}
		d = decideWindows(&ev, w, now)
	}
	f.counts[d.Reason].Add(1)
	return d, nil
}

// Posted records one of the bot's own posts: it opens or extends the windows
// the post causes under the channel's policy. A zero p.At means now.
func (f *Filter) Posted(ctx context.Context, p Post, pol core.Policy) error {
	now := f.now()
	if p.At.IsZero() {
		p.At = now
	}
	if err := Observe(p, pol).Apply(ctx, f.store, now); err != nil {
		return fmt.Errorf("intent: record bot post %s: %w", p.MessageID, err)
	}
	return nil
}

// ObservePost implements core.PostObserver: the engine tells the filter
// about each of the bot's posts, which opens or extends the windows it
// causes under the policy it was posted with.
func (f *Filter) ObservePost(ctx context.Context, p core.PostedMessage) error {
	return f.Posted(ctx, Post{
		Channel: p.Scope.Key(), Thread: p.Scope.Thread, MessageID: p.MessageID, At: p.At,
		Answering: p.Answering, AnsweringUser: p.AnsweringUser, AnsweringTop: p.AnsweringTop, AnsweringDM: p.AnsweringDM,
	}, p.Policy)
}

// ObservePostIntent implements core.PostIntentObserver: the windows a post
// will open are opened just before it is sent (no message id yet: a
// top-level post's own thread opens when it is recorded).
func (f *Filter) ObservePostIntent(ctx context.Context, p core.PostedMessage) error {
	return f.ObservePost(ctx, p)
}

// Counts returns a snapshot of the decision counters.
func (f *Filter) Counts() Counts {
	var c Counts
	for r := reasonInvalid + 1; r < reasonEnd; r++ {
		c.n[r] = f.counts[r].Load()
	}
	c.StoreErrors = f.storeErrors.Load()
	return c
}

// Counts is a snapshot of a Filter's counters, for metrics.
type Counts struct {
	n [reasonEnd]uint64
	// StoreErrors counts decisions made without windows because the store failed.
	StoreErrors uint64
}

// Get returns the number of decisions with reason r.
func (c Counts) Get(r Reason) uint64 {
	if !r.Valid() {
		return 0
	}
	return c.n[r]
}

// All yields every reason with its count, in declaration order.
func (c Counts) All() iter.Seq2[Reason, uint64] {
	return func(yield func(Reason, uint64) bool) {
		for r := reasonInvalid + 1; r < reasonEnd; r++ {
			if !yield(r, c.n[r]) {
				return
			}
		}
	}
}

// Routed returns the number of routed messages.
func (c Counts) Routed() uint64 {
	var n uint64
	for r, v := range c.All() {
		if r.Routes() {
			n += v
		}
	}
	return n
}

// Ignored returns the number of ignored messages.
func (c Counts) Ignored() uint64 {
	var n uint64
	for r, v := range c.All() {
		if !r.Routes() {
			n += v
		}
	}
	return n
}
