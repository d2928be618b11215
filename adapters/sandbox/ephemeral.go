package sandbox

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/marlowe-bot/marlowe/core"
)

var _ core.Ephemeral = (*Sandbox)(nil)

// PostEphemeral implements core.Ephemeral, as Slack's chat.postEphemeral:
// a message from the bot in a channel or thread that only userID sees
// ("Only visible to you" on their page; everyone else's page never shows
// it). Like Slack's, it is not kept: it is not in History, not written to
// the data file, and gone after a restart.
func (s *Sandbox) PostEphemeral(ctx context.Context, scope core.Scope, userID, text string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("sandbox: post ephemeral: %w", err)
	}
	if strings.TrimSpace(text) == "" {
		return errors.New("sandbox: post ephemeral: empty text")
	}
	if !utf8.ValidString(text) {
		return errors.New("sandbox: post ephemeral: text is not UTF-8")
	}
	p, ok := s.dir.person(userID)
	if !ok {
		return fmt.Errorf("sandbox: post ephemeral: person %q: %w", userID, ErrNotFound)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.checkScopeLocked(scope); err != nil {
		return fmt.Errorf("sandbox: post ephemeral: %w", err)
	}
	if ch, _ := s.dir.channel(scope.Channel); !ch.member(p.ID) {
		return fmt.Errorf("sandbox: post ephemeral: %s is not a member of #%s: %w", p.Name, ch.Name, errForbidden)
	}
	return s.postEphemeralLocked(scope.Channel, scope.Thread, p.ID, text)
}

func (s *Sandbox) postEphemeralLocked(channel, thread, to, text string) error {
	at := s.now()
	m := &message{
		ID:      s.newIDLocked(at),
		Channel: channel,
		Thread:  thread,
		Author:  s.dir.bot.ID,
		Bot:     true,
		Text:    text,
		To:      to,
		At:      at,
	}
	if err := s.commitLocked(m); err != nil {
		return fmt.Errorf("sandbox: post ephemeral: %w", err)
	}
	return nil
}

// clickDone ends personID's click on message id: the page enables that
// person's buttons again (a refused click leaves the card usable; an
// accepted one is followed by the card's resolution). A delivery that
// failed is told to the clicker alone, where the card is.
func (s *Sandbox) clickDone(id, personID string, failed error) {
	s.change(id, func(m *message) bool {
		i := slices.Index(m.Clicking, personID)
		if i < 0 {
			return false
		}
		m.Clicking = slices.Delete(slices.Clone(m.Clicking), i, i+1)
		if len(m.Clicking) == 0 {
			m.Clicking = nil
		}
		return true
	})
	if failed == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.msgs[id]
	if !ok {
		return
	}
	title := "the card"
	if m.Card != nil && m.Card.Title != "" {
		title = "“" + m.Card.Title + "”"
	}
	if err := s.postEphemeralLocked(m.Channel, m.Thread, personID, "⚠️ Your click on "+title+" could not be delivered, so nothing was done: "+failed.Error()); err != nil {
		s.log.Error("sandbox: tell the clicker", "message", id, "err", err)
	}
}
