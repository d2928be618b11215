package sandbox

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/marlowe-bot/marlowe/core"
)

// ErrNotFound is returned for a message, channel or person the workspace
// does not have.
var ErrNotFound = errors.New("sandbox: not found")

// Post implements core.Surface: the bot posts in a channel or a thread. A
// post whose Key was already posted returns that message's ref and changes
// nothing.
func (s *Sandbox) Post(ctx context.Context, out core.Outbound) (core.MessageRef, error) {
	if err := ctx.Err(); err != nil {
		return core.MessageRef{}, fmt.Errorf("sandbox: post: %w", err)
	}
	if strings.TrimSpace(out.Text) == "" && out.Card == nil {
		return core.MessageRef{}, errors.New("sandbox: post: neither text nor card")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if out.Key != "" {
		if id, ok := s.keys[out.Key]; ok {
			m := s.msgs[id]
			return core.MessageRef{Scope: s.scopeOf(m), ID: m.ID, At: m.At}, nil
		}
	}
	if err := s.checkScopeLocked(out.Scope); err != nil {
		return core.MessageRef{}, fmt.Errorf("sandbox: post: %w", err)
	}
	at := s.now()
	m := &message{
		ID:      s.newIDLocked(at),
		Channel: out.Scope.Channel,
		Thread:  out.Scope.Thread,
		Author:  s.dir.bot.ID,
		Bot:     true,
		Text:    out.Text,
		Card:    cloneCard(out.Card),
		Key:     out.Key,
		At:      at,
	}
	if err := s.commitLocked(m); err != nil {
		return core.MessageRef{}, fmt.Errorf("sandbox: post: %w", err)
	}
	return core.MessageRef{Scope: s.scopeOf(m), ID: m.ID, At: m.At}, nil
}

// checkScopeLocked validates where the bot posts: a sandbox channel and, for
// a thread, a top-level root in that channel.
func (s *Sandbox) checkScopeLocked(sc core.Scope) error {
	if sc.Platform != Platform {
		return fmt.Errorf("scope platform %q is not %q", sc.Platform, Platform)
	}
	if sc.Workspace != "" && sc.Workspace != Workspace {
		return fmt.Errorf("scope workspace %q is not %q", sc.Workspace, Workspace)
	}
	if _, ok := s.dir.channel(sc.Channel); !ok {
		return fmt.Errorf("channel %q: %w", sc.Channel, ErrNotFound)
	}
	if sc.Thread != "" {
		root, ok := s.msgs[sc.Thread]
		if !ok || root.Channel != sc.Channel || root.To != "" {
			return fmt.Errorf("thread root %q in %q: %w", sc.Thread, sc.Channel, ErrNotFound)
		}
		if root.Thread != "" {
			return fmt.Errorf("thread root %q is itself a reply", sc.Thread)
		}
	}
	return nil
}

// Update implements core.Surface: it replaces the text and card of one of
// the bot's messages in place (checklists, card resolutions). An update
// that changes nothing is not an event.
func (s *Sandbox) Update(ctx context.Context, ref core.MessageRef, out core.Outbound) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("sandbox: update: %w", err)
	}
	if strings.TrimSpace(out.Text) == "" && out.Card == nil {
		return errors.New("sandbox: update: neither text nor card")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m, err := s.botMessageLocked(ref)
	if err != nil {
		return fmt.Errorf("sandbox: update: %w", err)
	}
	if m.Text == out.Text && reflect.DeepEqual(m.Card, out.Card) {
		return nil
	}
	nm := *m
	nm.Text = out.Text
	nm.Card = cloneCard(out.Card)
	nm.Edited = s.now()
	if err := s.commitLocked(&nm); err != nil {
		return fmt.Errorf("sandbox: update: %w", err)
	}
	return nil
}

func (s *Sandbox) botMessageLocked(ref core.MessageRef) (*message, error) {
	m, ok := s.msgs[ref.ID]
	if !ok || (ref.Scope.Channel != "" && ref.Scope.Channel != m.Channel) {
		return nil, fmt.Errorf("message %q: %w", ref.ID, ErrNotFound)
	}
	if !m.Bot {
		return nil, fmt.Errorf("message %q is not the bot's", ref.ID)
	}
	return m, nil
}

// React implements core.Surface: the bot reacts to any message (the
// acknowledgement on a person's message). Reacting twice with the same
// emoji is one reaction. Names may be given with or without colons
// ("eyes", ":eyes:") or as the emoji itself.
func (s *Sandbox) React(ctx context.Context, ref core.MessageRef, emoji string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("sandbox: react: %w", err)
	}
	emoji = strings.Trim(strings.TrimSpace(emoji), ":")
	if emoji == "" || len(emoji) > 64 || !utf8.ValidString(emoji) {
		return fmt.Errorf("sandbox: react: bad emoji %q", emoji)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.msgs[ref.ID]
	if !ok || (ref.Scope.Channel != "" && ref.Scope.Channel != m.Channel) {
		return fmt.Errorf("sandbox: react: message %q: %w", ref.ID, ErrNotFound)
	}
	if slices.Contains(m.Reactions, emoji) {
		return nil
	}
	nm := *m
	nm.Reactions = append(slices.Clip(m.Reactions), emoji)
	if err := s.commitLocked(&nm); err != nil {
		return fmt.Errorf("sandbox: react: %w", err)
	}
	return nil
}

// OpenDM implements core.Surface: the DM channel between the bot and a
// person.
func (s *Sandbox) OpenDM(_ context.Context, userID string) (core.Scope, error) {
	ch, ok := s.dir.dmOf(userID)
	if !ok {
		return core.Scope{}, fmt.Errorf("sandbox: open dm with %q: %w", userID, ErrNotFound)
	}
	return core.Scope{Platform: Platform, Workspace: Workspace, Channel: ch.ID}, nil
}

// History implements core.Surface: a thread's messages (root first) or, for
// a top-level scope, the channel's top-level messages, oldest first, at
// most limit of the latest (all when limit <= 0).
func (s *Sandbox) History(ctx context.Context, thread core.Scope, limit int) ([]core.Event, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("sandbox: history: %w", err)
	}
	if _, ok := s.dir.channel(thread.Channel); !ok {
		return nil, fmt.Errorf("sandbox: history: channel %q: %w", thread.Channel, ErrNotFound)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var ms []*message
	for _, m := range s.msgs {
		if m.Channel != thread.Channel || m.To != "" || m.Stream != nil && m.Text == "" {
			continue // an ephemeral message is nobody's history, nor a stream with no text yet
		}
		if thread.Thread == "" && m.Thread == "" || thread.Thread != "" && (m.ID == thread.Thread || m.Thread == thread.Thread) {
			ms = append(ms, m)
		}
	}
	slices.SortFunc(ms, func(a, b *message) int { return strings.Compare(a.ID, b.ID) })
	if limit > 0 && len(ms) > limit {
		ms = ms[len(ms)-limit:]
	}
	out := make([]core.Event, 0, len(ms))
	for _, m := range ms {
		out = append(out, s.eventLocked(m))
	}
	return out, nil
}

// say stores a person's message from the page and queues its delivery.
func (s *Sandbox) say(personID, channelID, thread, text string) (*message, error) {
	return s.sayWith(personID, channelID, thread, text, nil)
}

// sayWith is say with files attached: a message may then have no text.
func (s *Sandbox) sayWith(personID, channelID, thread, text string, files []fileView) (*message, error) {
	p, ok := s.dir.person(personID)
	if !ok {
		return nil, fmt.Errorf("person %q: %w", personID, ErrNotFound)
	}
	ch, ok := s.dir.channel(channelID)
	if !ok {
		return nil, fmt.Errorf("channel %q: %w", channelID, ErrNotFound)
	}
	if !ch.member(p.ID) {
		return nil, fmt.Errorf("%s is not a member of #%s: %w", p.Name, ch.Name, errForbidden)
	}
	text = strings.TrimRight(text, " \t\r\n")
	if strings.TrimSpace(text) == "" && len(files) == 0 {
		return nil, fmt.Errorf("empty message: %w", errBadRequest)
	}
	if len(text) > maxTextBytes || !utf8.ValidString(text) {
		return nil, fmt.Errorf("message too long or not UTF-8: %w", errBadRequest)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if thread != "" {
		root, ok := s.msgs[thread]
		if !ok || root.Channel != ch.ID || root.Thread != "" || root.To != "" {
			return nil, fmt.Errorf("thread %q in #%s: %w", thread, ch.Name, ErrNotFound)
		}
	}
	if len(s.queue) >= maxQueue {
		return nil, errBusy
	}
	at := s.now()
	m := &message{ID: s.newIDLocked(at), Channel: ch.ID, Thread: thread, Author: p.ID, Text: text, Files: files, At: at, State: statePending}
	if err := s.commitLocked(m); err != nil {
		return nil, err
	}
	s.enqueueLocked(inbound{msgID: m.ID})
	return m, nil
}

// click turns a button press on the page into a queued core.CardClick.
func (s *Sandbox) click(personID, msgID, actionID string) (core.CardClick, error) {
	p, ok := s.dir.person(personID)
	if !ok {
		return core.CardClick{}, fmt.Errorf("person %q: %w", personID, ErrNotFound)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.msgs[msgID]
	if !ok || m.Card == nil {
		return core.CardClick{}, fmt.Errorf("card message %q: %w", msgID, ErrNotFound)
	}
	ch, _ := s.dir.channel(m.Channel)
	if !ch.member(p.ID) {
		return core.CardClick{}, fmt.Errorf("%s is not a member of #%s: %w", p.Name, ch.Name, errForbidden)
	}
	if m.Card.Resolution != "" {
		return core.CardClick{}, fmt.Errorf("card %q is already resolved: %w", m.Card.ID, errConflict)
	}
	// An unknown action is that, whether or not an earlier click is
	// still being handled.
	i := slices.IndexFunc(m.Card.Actions, func(a core.CardAction) bool { return a.ID == actionID })
	if i < 0 {
		return core.CardClick{}, fmt.Errorf("card %q has no action %q: %w", m.Card.ID, actionID, ErrNotFound)
	}
	if slices.Contains(m.Clicking, p.ID) {
		return core.CardClick{}, fmt.Errorf("%s's click on card %q is still being handled: %w", p.Name, m.Card.ID, errConflict)
	}
	if len(s.queue) >= maxQueue {
		return core.CardClick{}, errBusy
	}
	a := m.Card.Actions[i]
	c := core.CardClick{
		Scope:  s.scopeOf(m),
		Card:   m.Card.ID,
		Action: a.ID,
		Token:  a.Token,
		By:     core.Person{ID: p.ID, Name: p.Name},
		At:     s.now(),
	}
	// The clicker's buttons wait until the click is handled; nobody else's.
	nm := *m
	nm.Notice = ""
	nm.Clicking = append(slices.Clip(m.Clicking), p.ID)
	if err := s.commitLocked(&nm); err != nil {
		return core.CardClick{}, err
	}
	s.clicks++
	s.enqueueLocked(inbound{msgID: m.ID, click: &c, key: "click:" + m.ID + ":" + p.ID + ":" + strconv.FormatUint(s.clicks, 10)})
	return c, nil
}

func cloneCard(c *core.Card) *core.Card {
	if c == nil {
		return nil
	}
	cc := *c
	cc.Fields = slices.Clone(c.Fields)
	cc.Actions = slices.Clone(c.Actions)
	return &cc
}

// WorkspaceOwner is the simulated person who administers the sandbox
// workspace, as a workspace owner does on a real platform: Alice can change
// channel policy out of the box; Bob and the others cannot until she names
// them with `policy set admins`.
const WorkspaceOwner = "alice"

var _ core.Administrators = (*Sandbox)(nil)

// IsAdmin reports whether userID administers the sandbox workspace.
func (s *Sandbox) IsAdmin(_ context.Context, _ core.Scope, userID string) (bool, error) {
	return userID == WorkspaceOwner, nil
}
