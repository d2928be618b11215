package sandbox

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/marlowe-bot/marlowe/core"
)

// The typing indicator ("Marlowe is thinking…", core.Typing): like
// Discord's and Telegram's it lasts a few seconds unless asked for again,
// and the bot's next new message in that conversation clears it. It is
// not a message: it is sent to pages as a "typing" event and never
// persisted.

var _ core.Typing = (*Sandbox)(nil)

// typingLasts is how long one Typing call shows the indicator.
const typingLasts = 6 * time.Second

// typingView is one conversation's indicator as pages receive it: the
// milliseconds it has left (the page counts them on its own clock).
type typingView struct {
	Channel string `json:"channel"`
	Thread  string `json:"thread,omitempty"`
	MS      int64  `json:"ms"`
}

type typingKey struct{ channel, thread string }

// Typing implements core.Typing: pages viewing scope's conversation show
// that Marlowe is thinking, for typingLasts.
func (s *Sandbox) Typing(ctx context.Context, scope core.Scope) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("sandbox: typing: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.checkScopeLocked(scope); err != nil {
		return fmt.Errorf("sandbox: typing: %w", err)
	}
	s.typing[typingKey{scope.Channel, scope.Thread}] = s.now().Add(typingLasts)
	s.typingChangedLocked()
	return nil
}

// TypingEvery implements core.Typing: a little less than it lasts.
func (s *Sandbox) TypingEvery() time.Duration { return 4 * time.Second }

// clearTypingLocked ends the indicator of a conversation the bot just
// posted a new message in, as platforms do.
func (s *Sandbox) clearTypingLocked(channel, thread string) {
	k := typingKey{channel, thread}
	if _, ok := s.typing[k]; ok {
		delete(s.typing, k)
		s.typingChangedLocked()
	}
}

func (s *Sandbox) typingChangedLocked() {
	s.typingRev++
	for c := range s.subs {
		select {
		case c <- struct{}{}:
		default:
		}
	}
}

// typingSince returns the indicators now showing when they changed after
// rev, with the revision they are at.
func (s *Sandbox) typingSince(rev int64) ([]typingView, int64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.typingRev == rev {
		return nil, rev, false
	}
	now := s.now()
	out := []typingView{}
	for k, until := range s.typing {
		if left := until.Sub(now); left > 0 {
			out = append(out, typingView{Channel: k.channel, Thread: k.thread, MS: left.Milliseconds()})
		} else {
			delete(s.typing, k)
		}
	}
	slices.SortFunc(out, func(a, b typingView) int {
		return cmp.Or(cmp.Compare(a.Channel, b.Channel), cmp.Compare(a.Thread, b.Thread))
	})
	return out, s.typingRev, true
}
