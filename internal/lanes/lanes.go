// Package lanes runs work in order per key and keys concurrently: one
// goroutine per key that has work waiting, none for an idle key. Adapters
// use it for inbound deliveries, so one channel's messages keep their order
// while a slow delivery in one channel (a first append, a lease claim) never
// delays another channel's acknowledgement, as a fixed set of shards would
// for every channel hashed to the same shard.
package lanes

import (
	"context"
	"sync"
	"time"
)

// Deliveries is how many inbound deliveries an adapter runs at once: enough
// that a few slow channels do not hold up the rest, few enough that an
// overload queues here rather than in the store's and Redis's connection
// pools (measured at saturation: 8 and 16 alike, 64 let three replicas miss
// their acks; docs/operations.md).
const Deliveries = 16

// Lanes queues items by key and runs each key's items in the order added.
type Lanes[T any] struct {
	run     func(T)
	slots   chan struct{} // one per item queued or running: back-pressure
	running chan struct{} // one per item running: bounds the work at once

	mu     sync.Mutex
	queued map[string][]T // a key is present while its goroutine runs
	wg     sync.WaitGroup
}

// New returns lanes that call run for each item, with at most queued items
// waiting or running across all keys and at most running of them running
// at once (values < 1 mean 1). Bounding the running ones keeps an overload
// a queue, in arrival order, rather than hundreds of deliveries contending
// for the same database and Redis connections until all of them miss
// their deadline.
func New[T any](queued, running int, run func(T)) *Lanes[T] {
	return &Lanes[T]{run: run, slots: make(chan struct{}, max(1, queued)),
		running: make(chan struct{}, max(1, running)), queued: map[string][]T{}}
}

// Add queues item on key's lane. It waits while the limit is reached, and
// returns ctx's error (item not queued) when ctx ends first.
func (l *Lanes[T]) Add(ctx context.Context, key string, item T) error {
	select {
	case l.slots <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	l.mu.Lock()
	q, busy := l.queued[key]
	l.queued[key] = append(q, item)
	if !busy {
		l.wg.Add(1)
		go l.drain(key)
	}
	l.mu.Unlock()
	return nil
}

// Len is how many items are queued or running.
func (l *Lanes[T]) Len() int { return len(l.slots) }

// Wait waits until every item added has run.
func (l *Lanes[T]) Wait() { l.wg.Wait() }

// Drain is how a receiver told to stop delivers what it still holds: it
// waits at most timeout for every item added to run, then calls cancel
// (which should make the rest return at once) and waits for them. It
// reports whether everything ran within timeout.
func (l *Lanes[T]) Drain(timeout time.Duration, cancel func()) bool {
	done := make(chan struct{})
	go func() { l.Wait(); close(done) }()
	t := time.NewTimer(timeout)
	defer t.Stop()
	drained := true
	select {
	case <-done:
	case <-t.C:
		drained = false
	}
	cancel()
	<-done
	return drained
}

func (l *Lanes[T]) drain(key string) {
	defer l.wg.Done()
	for {
		l.mu.Lock()
		q := l.queued[key]
		if len(q) == 0 {
			delete(l.queued, key)
			l.mu.Unlock()
			return
		}
		item := q[0]
		var zero T
		q[0] = zero // the backing array may outlive this item
		l.queued[key] = q[1:]
		l.mu.Unlock()
		l.running <- struct{}{}
		l.run(item)
		<-l.running
		<-l.slots
	}
}
