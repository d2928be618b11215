package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/fold"
	"github.com/marlowe-bot/marlowe/replica"
)

// chanView is the engine's cache of one channel: the channel's one fold
// (fold.Channel: policy, consents, approvals, runs per thread, token
// use per day, delivered message ids, ...). It is rebuilt from the journal
// when first touched and advanced by every append the engine makes, so it
// is a cache with a rebuild path, never a second truth. Appends go through
// it, under its lock, which makes check-then-append (is this approval still
// pending? did a steering message arrive before completion?) atomic within
// the process.
type chanView struct {
	key core.ChannelKey
	j   core.Journal

	mu     sync.Mutex
	loaded bool
	seq    uint64
	// foreign counts commands folded by catching up (appended by another
	// replica); woke is its value at the owner's last Wake.
	foreign, woke int
	// fold is read under mu. A field, not embedded: its Apply runs only
	// through v.apply, which checks the sequence once.
	fold fold.Channel
	// ck is the view's checkpoint state (checkpoint.go); its config is the
	// engine's. A pointer so that reset can renew it in one place.
	ck *viewCheckpoint

	// touched is when the engine last handed the view out (guarded by
	// Engine.chMu): eviction drops views untouched for a while (evict.go).
	touched time.Time
	// borrows counts the installation-wide jobs reading the view now
	// (borrow.go; guarded by Engine.chMu): eviction leaves it to them.
	borrows int

	// tr makes journal append spans (trace.go); traced: spans go somewhere.
	tr     trace.Tracer
	traced bool
	// appendFailed, when set, counts a journal append that failed.
	appendFailed func()
}

func newChanView(key core.ChannelKey, j core.Journal) *chanView {
	return &chanView{key: key, j: j, fold: fold.NewChannel(key), ck: &viewCheckpoint{}}
}

// load folds the channel's journal once. Callers hold v.mu.
func (v *chanView) load(ctx context.Context) error {
	if v.loaded {
		return nil
	}
	// From the latest checkpoint when there is a usable one (checkpoint.go),
	// else from seq 1.
	// A redaction after the checkpoint of a command it covers is folded
	// like any command: the fold drops what it copied from the command
	// (snapshots hold conversation turns by reference, never their text).
	v.restore(ctx)
	if err := v.catchUp(ctx); err != nil {
		return err
	}
	v.loaded = true
	return nil
}

// catchUp applies whatever the journal holds past v.seq (another process's
// appends, or a gap). Callers hold v.mu.
func (v *chanView) catchUp(ctx context.Context) error {
	const page = 2048
	for {
		cmds, err := v.j.Read(ctx, v.key, v.seq+1, page)
		if err != nil {
			return fmt.Errorf("load channel %s from seq %d: %w", v.key, v.seq+1, err)
		}
		for _, c := range cmds {
			if err := v.apply(c); err != nil {
				return err
			}
		}
		if v.loaded {
			v.foreign += len(cmds)
		}
		if len(cmds) < page {
			return nil
		}
	}
}

// errCheckFailed wraps a refused conditional append.
var errCheckFailed = errors.New("append precondition failed")

// append appends drafts atomically after check (run under the lock) passes,
// then folds the result. check may be nil.
func (v *chanView) append(ctx context.Context, check func() error, drafts ...core.Draft) ([]core.Command, error) {
	return v.appendPlan(ctx, func() ([]core.Draft, error) {
		if check != nil {
			if err := check(); err != nil {
				return nil, err
			}
		}
		return drafts, nil
	})
}

// appendPlan builds the drafts under the lock, from the current state, and
// appends them atomically at the head that state was folded from. When
// another replica appended in between, the append is refused; the view
// folds what it missed and plans again, so every decision is taken on the
// journal's current state. plan returning no drafts appends nothing. A ctx
// that drives the channel under a lease (replica.WithFence) fences the append.
func (v *chanView) appendPlan(ctx context.Context, plan func() ([]core.Draft, error)) ([]core.Command, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if err := v.load(ctx); err != nil {
		return nil, journalFailed(err)
	}
	fence := replica.FenceFor(ctx, v.key)
	for attempt := 1; ; attempt++ {
		drafts, err := plan()
		if err != nil || len(drafts) == 0 {
			return nil, err
		}
		var began time.Time
		if v.traced {
			began = time.Now()
		}
		cmds, err := v.j.AppendAt(ctx, core.Expect{Head: v.seq, Fence: fence}, drafts...)
		v.appendEvent(ctx, began, attempt, drafts, cmds, err)
		switch {
		case errors.Is(err, core.ErrHeadMoved) && attempt < maxReplans:
			if err := v.catchUp(ctx); err != nil {
				return nil, journalFailed(err)
			}
			continue
		case errors.Is(err, core.ErrFenced):
			return nil, fmt.Errorf("append %s to %s: %w: %w", drafts[0].Kind(), v.key, replica.ErrLeaseLost, err)
		case err != nil:
			if v.appendFailed != nil {
				v.appendFailed()
			}
			return nil, fmt.Errorf("append %s to %s: %w", drafts[0].Kind(), v.key, journalFailed(err))
		}
		for _, c := range cmds {
			if err := v.apply(c); err != nil {
				return cmds, err
			}
		}
		v.maybeCheckpoint(ctx, fence)
		return cmds, nil
	}
}

// maxReplans bounds how often one append is planned again because other
// replicas keep appending to the channel first.
const maxReplans = 64

// with runs fn under the lock on the loaded view.
func (v *chanView) with(ctx context.Context, fn func()) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if err := v.load(ctx); err != nil {
		return err
	}
	fn()
	return nil
}

// caughtUp calls fn under v's lock with everything the journal holds
// folded: a view not loaded yet is loaded (which catches up), a loaded one
// catches up, so a borrowed view costs one read of its journal, not two.
func (v *chanView) caughtUp(ctx context.Context, fn func()) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	var err error
	if v.loaded {
		err = v.catchUp(ctx)
	} else {
		err = v.load(ctx)
	}
	if err != nil {
		return err
	}
	fn()
	return nil
}

// apply folds one command into the cache, once: a command already folded
// (an append's own commands after a catch-up read them) is skipped. It is
// the cache's one entry to the fold. Callers hold v.mu.
func (v *chanView) apply(c core.Command) error {
	if c.Seq() <= v.seq {
		return nil
	}
	v.seq = c.Seq()
	v.ck.note(c)
	return v.fold.Apply(c)
}

// liveRun returns the thread's run that a new message should steer: one
// that is queued, working or waiting for approval. Callers hold v.mu.
func (v *chanView) liveRun(thread string) (*fold.Run, *fold.Run) {
	id, ok := v.fold.ThreadRun(thread)
	if !ok {
		return nil, nil
	}
	r := v.fold.Run(id)
	switch r.Status {
	case core.RunQueued, core.RunWorking, core.RunWaitingApproval:
		return r, nil
	case core.RunBlocked, core.RunNeedsPermission:
		return nil, r // parked: a new message replaces it
	case core.RunBroken, core.RunCancelled, core.RunDone:
		return nil, nil
	}
	panic(fmt.Sprintf("core: unhandled run status %q", r.Status))
}
