package sandbox

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/marlowe-bot/marlowe/core"
)

// The sandbox shows a run the way Slack's agent surface does (core.Streamer):
// one message holding a plan (a title and tasks, each with its state) with
// the answer streamed into it. The stream is an ordinary message of the
// workspace, persisted and keyed like Post's, so a restart finds a started
// stream again by its key and the engine finishes that same message.

var _ core.Streamer = (*Sandbox)(nil)

// streamView is a streamed message's plan, as stored and sent to pages;
// the streamed text is the message's Text.
type streamView struct {
	Title   string       `json:"title,omitempty"`
	Tasks   []streamTask `json:"tasks,omitempty"`
	Stopped bool         `json:"stopped,omitempty"`
}

type streamTask struct {
	ID     string          `json:"id"`
	Title  string          `json:"title"`
	Status core.TaskStatus `json:"status"`
	Output string          `json:"output,omitempty"`
}

func planOf(u core.StreamUpdate) (string, []streamTask) {
	var tasks []streamTask
	for _, t := range u.Tasks {
		tasks = append(tasks, streamTask{ID: t.ID, Title: t.Title, Status: t.Status, Output: t.Output})
	}
	return u.Title, tasks
}

// Streams implements core.Streamer: like Slack's, a stream replies in a
// thread; Config.NoStream keeps the checklist everywhere.
func (s *Sandbox) Streams(_ context.Context, scope core.Scope) bool {
	return !s.noStream && scope.Thread != ""
}

// StartStream implements core.Streamer: a bot message in out.Scope showing
// u's plan (and u.Text, if any). A key already posted or started returns
// that message and changes nothing, across restarts too (the key is in the
// data file), so a resumed start never makes a second message.
func (s *Sandbox) StartStream(ctx context.Context, out core.Outbound, u core.StreamUpdate) (core.MessageRef, error) {
	if err := ctx.Err(); err != nil {
		return core.MessageRef{}, fmt.Errorf("sandbox: start stream: %w", err)
	}
	if out.Key == "" {
		return core.MessageRef{}, errors.New("sandbox: start stream: a stream needs a key")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if id, ok := s.keys[out.Key]; ok {
		m := s.msgs[id]
		return core.MessageRef{Scope: s.scopeOf(m), ID: m.ID, At: m.At}, nil
	}
	if err := s.checkScopeLocked(out.Scope); err != nil {
		return core.MessageRef{}, fmt.Errorf("sandbox: start stream: %w", err)
	}
	at := s.now()
	title, tasks := planOf(u)
	m := &message{
		ID:      s.newIDLocked(at),
		Channel: out.Scope.Channel,
		Thread:  out.Scope.Thread,
		Author:  s.dir.bot.ID,
		Bot:     true,
		Text:    u.Text,
		Stream:  &streamView{Title: title, Tasks: tasks},
		Key:     out.Key,
		At:      at,
	}
	if err := s.commitLocked(m); err != nil {
		return core.MessageRef{}, fmt.Errorf("sandbox: start stream: %w", err)
	}
	return core.MessageRef{Scope: s.scopeOf(m), ID: m.ID, At: m.At}, nil
}

// AppendStream implements core.Streamer: the message shows u's plan, and
// when u.Text extends what it holds, the rest is appended. A text that does
// not extend it changes nothing (a stream's text only grows; StopStream
// sets the final one). On a stopped stream, or a message that is not one,
// nothing changes, and a text the message does not already hold is
// core.ErrStreamEnded, so the caller posts it instead.
func (s *Sandbox) AppendStream(ctx context.Context, ref core.MessageRef, u core.StreamUpdate) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("sandbox: append stream: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m, err := s.botMessageLocked(ref)
	if err != nil {
		return fmt.Errorf("sandbox: append stream: %w", err)
	}
	if m.Stream == nil || m.Stream.Stopped {
		if u.Text != "" && !strings.HasPrefix(m.Text, u.Text) {
			return fmt.Errorf("sandbox: append stream %s: %w", m.ID, core.ErrStreamEnded)
		}
		return nil
	}
	nm := *m
	title, tasks := planOf(u)
	nm.Stream = &streamView{Title: title, Tasks: tasks}
	if len(u.Text) > len(m.Text) && strings.HasPrefix(u.Text, m.Text) {
		nm.Text = u.Text
	}
	if nm.Text == m.Text && streamEqual(nm.Stream, m.Stream) {
		return nil
	}
	if err := s.commitLocked(&nm); err != nil {
		return fmt.Errorf("sandbox: append stream: %w", err)
	}
	return nil
}

// StopStream implements core.Streamer: the message ends showing u's plan
// and exactly u.Text, whether or not it extends what was streamed; an
// empty u.Text (a plan-only stop: a run that failed or paused) keeps the
// text streamed so far. Stopping a stopped stream changes nothing and is
// not an error.
func (s *Sandbox) StopStream(ctx context.Context, ref core.MessageRef, u core.StreamUpdate) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("sandbox: stop stream: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m, err := s.botMessageLocked(ref)
	if err != nil {
		return fmt.Errorf("sandbox: stop stream: %w", err)
	}
	if m.Stream == nil || m.Stream.Stopped {
		return nil
	}
	nm := *m
	title, tasks := planOf(u)
	if len(tasks) == 0 && strings.TrimSpace(u.Text) != "" {
		// A one-step answer that was slow enough to show "Working on it…":
		// the answer is all there is, with no empty "✅ Done" plan above.
		title = ""
	}
	nm.Stream = &streamView{Title: title, Tasks: tasks, Stopped: true}
	if u.Text != "" {
		nm.Text = u.Text
	}
	if err := s.commitLocked(&nm); err != nil {
		return fmt.Errorf("sandbox: stop stream: %w", err)
	}
	// The answer is in: "Marlowe is thinking…" ends now, not when it
	// lapses (a stream's answer is no new message, which would clear it).
	s.clearTypingLocked(m.Channel, m.Thread)
	return nil
}

func streamEqual(a, b *streamView) bool {
	return a.Title == b.Title && a.Stopped == b.Stopped && slices.Equal(a.Tasks, b.Tasks)
}
