package intent

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/marlowe-bot/marlowe/core"
)

// WindowStore keeps the intent windows. Implementations: NewMemoryStore
// (in process) and store/redis (shared by replicas). Every implementation
// passes intent/windowtest and is safe for concurrent use.
//
// Stores keep times to at least millisecond precision and may drop a window
// once it has expired; they may also still return one that expired a moment
// ago: Decide, given the time, is the judge of openness.
type WindowStore interface {
	// Windows returns the window of thread in ch (zero when thread is "" or
	// none is open) and ch's top-level window, in one read.
	Windows(ctx context.Context, ch core.ChannelKey, thread string) (Windows, error)
	// ExtendThread opens thread's window in ch until until, or extends it;
	// it never shortens an open window. A until already past is a no-op.
	ExtendThread(ctx context.Context, ch core.ChannelKey, thread string, until time.Time) error
	// SetToplevel gives ch's top-level window to w.Person until w.Until
	// (answering someone else moves it), unless the stored window is still
	// open and records a more recent answer (larger At): an answer that
	// arrives late never displaces a newer one. An answer whose window is
	// already past closes the channel's window.
	SetToplevel(ctx context.Context, ch core.ChannelKey, w Toplevel) error
}

// Post is one of the bot's own posts, as the window logic needs it.
type Post struct {
	Channel   core.ChannelKey
	Thread    string // thread root the post is in; "" for a top-level post
	MessageID string // the post's own message id
	At        time.Time

	Answering     string // message id the post answers; "" when unprompted (a digest)
	AnsweringUser string // that message's author
	AnsweringTop  bool   // that message was at top level (not in a thread)
	AnsweringDM   bool   // that message was in a DM: no top-level window
}

// Updates are the window changes one post causes.
type Updates struct {
	Channel core.ChannelKey
	// Thread is the thread whose window is opened or extended to
	// ThreadUntil; "" when none (a top-level post without a message id).
	Thread      string
	ThreadUntil time.Time
	// Toplevel, when SetToplevel is true, is the channel's new top-level window.
	SetToplevel bool
	Toplevel    Toplevel
}

// Observe computes the window updates of one bot post under the channel's
// policy. It is pure:
//
//   - a post in a thread opens or extends that thread's window to
//     post time + thread length;
//   - a top-level post opens the window of the thread rooted at itself;
//   - a post answering a top-level, non-DM message from person P (whether
//     the post is in a thread under it or at top level) gives P the
//     channel's top-level window until post time + top-level length.
func Observe(p Post, pol core.Policy) Updates {
	u := Updates{Channel: p.Channel, Thread: p.Thread}
	if u.Thread == "" {
		u.Thread = p.MessageID
	}
	if u.Thread != "" {
		u.ThreadUntil = p.At.Add(pol.ThreadWindow())
	}
	if p.Answering != "" && p.AnsweringTop && !p.AnsweringDM && p.AnsweringUser != "" {
		u.SetToplevel = true
		u.Toplevel = Toplevel{Person: p.AnsweringUser, At: p.At, Until: p.At.Add(pol.ToplevelWindow())}
	}
	return u
}

// Apply writes the updates to s. Windows that are already closed at now
// are not written (they could not route anything), except that a closed
// top-level window still moves the window away from an older answer.
func (u Updates) Apply(ctx context.Context, s WindowStore, now time.Time) error {
	if u.Thread != "" && now.Before(u.ThreadUntil) {
		if err := s.ExtendThread(ctx, u.Channel, u.Thread, u.ThreadUntil); err != nil {
			return fmt.Errorf("intent: extend thread window %s/%s: %w", u.Channel, u.Thread, err)
		}
	}
	if u.SetToplevel {
		if err := s.SetToplevel(ctx, u.Channel, u.Toplevel); err != nil {
			return fmt.Errorf("intent: set top-level window of %s: %w", u.Channel, err)
		}
	}
	return nil
}

// PostFromCommand reads a journaled message.posted command as a Post. ok is
// false for other kinds and for redacted posts (their payload is gone).
// The payload does not say whether the answered message was in a DM; the
// caller sets AnsweringDM when it knows (Rebuild does, from message.received).
func PostFromCommand(c core.Command) (p Post, ok bool, err error) {
	if c.Kind() != core.KindMessagePosted || c.Redacted() {
		return Post{}, false, nil
	}
	mp, err := core.Decode[*core.MessagePosted](c)
	if err != nil {
		if errors.Is(err, core.ErrRedacted) {
			return Post{}, false, nil
		}
		return Post{}, false, fmt.Errorf("intent: read post %s: %w", c, err)
	}
	return Post{
		Channel:       c.Channel(),
		Thread:        c.Scope().Thread,
		MessageID:     mp.MessageID,
		At:            c.At(),
		Answering:     mp.Answering,
		AnsweringUser: mp.AnsweringUser,
		AnsweringTop:  mp.AnsweringTop,
	}, true, nil
}

// Rebuild restores windows from journaled commands (typically the recent
// tail of every channel's journal). It replays each message.posted through
// Observe, folds the results (a thread keeps its latest until, a channel its
// most recent top-level answer) and writes only the windows still open at
// now: windows already expired are skipped. It is idempotent and safe to run
// against a store that live posts are already writing to.
//
// Window lengths: a policy.changed command in cmds is the channel's policy
// for the posts after it (as it was live); before any, policy(ch) is used
// (nil means defaults). A post answering a message that cmds show was a DM
// (message.received with visibility dm) opens no top-level window.
// It returns the number of windows written.
func Rebuild(ctx context.Context, s WindowStore, cmds []core.Command, policy func(core.ChannelKey) core.Policy, now time.Time) (int, error) {
	pols := map[core.ChannelKey]core.Policy{}
	dms := map[threadKey]bool{} // (channel, message id) of DM messages
	threads := map[threadKey]time.Time{}
	tops := map[core.ChannelKey]Toplevel{}
	for _, c := range cmds {
		if c.Redacted() {
			continue
		}
		switch c.Kind() {
		case core.KindPolicyChanged:
			pc, err := core.Decode[*core.PolicyChanged](c)
			if err != nil {
				return 0, fmt.Errorf("intent: rebuild windows: %w", err)
			}
			pols[c.Channel()] = pc.Policy
		case core.KindMessageReceived:
			mr, err := core.Decode[*core.MessageReceived](c)
			if err != nil {
				return 0, fmt.Errorf("intent: rebuild windows: %w", err)
			}
			if mr.Visibility == core.DM && mr.MessageID != "" {
				dms[threadKey{c.Channel(), mr.MessageID}] = true
			}
		case core.KindMessagePosted:
			p, ok, err := PostFromCommand(c)
			if err != nil {
				return 0, fmt.Errorf("intent: rebuild windows: %w", err)
			}
			if !ok {
				continue
			}
			p.AnsweringDM = dms[threadKey{p.Channel, p.Answering}]
			pol, ok := pols[p.Channel]
			if !ok && policy != nil {
				pol = policy(p.Channel)
			}
			u := Observe(p, pol)
			if u.Thread != "" {
				k := threadKey{u.Channel, u.Thread}
				if u.ThreadUntil.After(threads[k]) {
					threads[k] = u.ThreadUntil
				}
			}
			if u.SetToplevel {
				if cur, ok := tops[u.Channel]; !ok || !u.Toplevel.At.Before(cur.At) {
					tops[u.Channel] = u.Toplevel
				}
			}
		default:
			// Other kinds do not touch windows.
		}
	}
	n := 0
	for k, until := range threads {
		if !now.Before(until) {
			continue
		}
		if err := s.ExtendThread(ctx, k.ch, k.thread, until); err != nil {
			return n, fmt.Errorf("intent: rebuild thread window %s/%s: %w", k.ch, k.thread, err)
		}
		n++
	}
	for ch, top := range tops {
		if !now.Before(top.Until) {
			continue
		}
		if err := s.SetToplevel(ctx, ch, top); err != nil {
			return n, fmt.Errorf("intent: rebuild top-level window of %s: %w", ch, err)
		}
		n++
	}
	return n, nil
}
