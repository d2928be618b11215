package slackfake

import (
	"encoding/json"
	"slices"
	"time"
)

// Slack's agent surface: streamed messages (chat.startStream,
// chat.appendStream, chat.stopStream, with markdown_text, plan_update and
// task_update chunks) and assistant threads (assistant.threads.setStatus,
// .setSuggestedPrompts, .setTitle). A streamed message is stored like any
// message (conversations.replies returns it, its text the markdown so far,
// its metadata the one chat.stopStream set); every call is recorded.

// Stream is one streamed message as it stands.
type Stream struct {
	Channel, TS, ThreadTS        string
	RecipientUser, RecipientTeam string
	DisplayMode                  string // task_display_mode
	Text                         string // the markdown streamed so far
	Plan                         string // the latest plan_update title
	Tasks                        []Task // by first appearance, each as last updated
	Stopped                      bool
	Calls                        []StreamCall
}

// Task is a task of a streamed plan.
type Task struct {
	ID, Title, Status, Output string
}

// StreamCall is one accepted chat.*Stream call on a stream.
type StreamCall struct {
	Method string
	Text   string           // markdown it appended
	Chunks []map[string]any // its chunks as sent
	At     time.Time
}

// StatusCall is one accepted assistant.threads.setStatus.
type StatusCall struct {
	Channel, ThreadTS, Status string
	At                        time.Time
}

// Prompts is one accepted assistant.threads.setSuggestedPrompts.
type Prompts struct {
	Channel, ThreadTS, Title string
	Prompts                  []map[string]string
}

// Title is one accepted assistant.threads.setTitle.
type Title struct {
	Channel, ThreadTS, Title string
}

type agentBook struct {
	streams  []*Stream
	statuses []StatusCall
	prompts  []Prompts
	titles   []Title
	// waiters are closed when a status they wait for is set (StatusSet).
	waiters map[string][]chan struct{}
}

// agentAPI answers the agent surface's methods; ok is false for others.
func (s *Server) agentAPI(r apiReq) (resp any, ok bool) {
	switch r.method {
	case "chat.startStream":
		return s.startStream(r), true
	case "chat.appendStream", "chat.stopStream":
		return s.streamOn(r), true
	case "assistant.threads.setStatus":
		s.mu.Lock()
		defer s.mu.Unlock()
		s.agent.statuses = append(s.agent.statuses, StatusCall{Channel: r.form.Get("channel_id"), ThreadTS: r.form.Get("thread_ts"), Status: r.form.Get("status"), At: time.Now()})
		for _, c := range s.agent.waiters[r.form.Get("status")] {
			close(c)
		}
		delete(s.agent.waiters, r.form.Get("status"))
		return map[string]any{"ok": true}, true
	case "assistant.threads.setSuggestedPrompts":
		var ps []map[string]string
		if json.Unmarshal([]byte(r.form.Get("prompts")), &ps) != nil || len(ps) == 0 || len(ps) > 4 {
			return fail("invalid_arguments"), true
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		s.agent.prompts = append(s.agent.prompts, Prompts{Channel: r.form.Get("channel_id"), ThreadTS: r.form.Get("thread_ts"), Title: r.form.Get("title"), Prompts: ps})
		return map[string]any{"ok": true}, true
	case "assistant.threads.setTitle":
		s.mu.Lock()
		defer s.mu.Unlock()
		s.agent.titles = append(s.agent.titles, Title{Channel: r.form.Get("channel_id"), ThreadTS: r.form.Get("thread_ts"), Title: r.form.Get("title")})
		return map[string]any{"ok": true}, true
	}
	return nil, false
}

func (s *Server) startStream(r apiReq) any {
	ch, thread := r.form.Get("channel"), r.form.Get("thread_ts")
	if ch == "" {
		return fail("channel_not_found")
	}
	if s.ChannelType(ch) != "im" && (r.form.Get("recipient_user_id") == "" || r.form.Get("recipient_team_id") == "") {
		return fail("missing_recipient_user_id") // required outside a DM
	}
	chunks, err := parseChunks(r.form.Get("chunks"))
	if err != nil {
		return fail("invalid_chunks")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m := &Message{Channel: ch, TS: s.nextTSLocked(), ThreadTS: thread, User: s.cfg.BotUserID, BotID: s.cfg.BotID, StreamingState: "in_progress"}
	s.messages[ch] = append(s.messages[ch], m)
	st := &Stream{Channel: ch, TS: m.TS, ThreadTS: thread, RecipientUser: r.form.Get("recipient_user_id"),
		RecipientTeam: r.form.Get("recipient_team_id"), DisplayMode: r.form.Get("task_display_mode")}
	s.agent.streams = append(s.agent.streams, st)
	st.apply(m, r, chunks)
	return map[string]any{"ok": true, "channel": ch, "ts": m.TS}
}

func (s *Server) streamOn(r apiReq) any {
	ch, ts := r.form.Get("channel"), r.form.Get("ts")
	chunks, err := parseChunks(r.form.Get("chunks"))
	if err != nil {
		return fail("invalid_chunks")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.findLocked(ch, ts)
	var st *Stream
	for _, x := range s.agent.streams {
		if x.Channel == ch && x.TS == ts {
			st = x
		}
	}
	if m == nil || st == nil {
		return fail("message_not_found")
	}
	if st.Stopped {
		return fail("message_not_in_streaming_state")
	}
	st.apply(m, r, chunks)
	if r.method == "chat.stopStream" {
		st.Stopped, m.StreamingState = true, "completed"
		if md := r.form.Get("metadata"); md != "" {
			m.Metadata = json.RawMessage(md)
		}
	}
	return map[string]any{"ok": true, "channel": ch, "ts": ts}
}

// apply records one call on the stream and updates its message.
func (st *Stream) apply(m *Message, r apiReq, chunks []map[string]any) {
	call := StreamCall{Method: r.method, Text: r.form.Get("markdown_text"), Chunks: chunks, At: time.Now()}
	for _, c := range chunks {
		str := func(k string) string { v, _ := c[k].(string); return v }
		switch str("type") {
		case "markdown_text":
			call.Text += str("text")
		case "plan_update":
			st.Plan = str("title")
		case "task_update":
			t := Task{ID: str("id"), Title: str("title"), Status: str("status"), Output: str("output")}
			if i := slices.IndexFunc(st.Tasks, func(x Task) bool { return x.ID == t.ID }); i >= 0 {
				st.Tasks[i] = t
			} else {
				st.Tasks = append(st.Tasks, t)
			}
		}
	}
	st.Text += call.Text
	m.Text = st.Text
	st.Calls = append(st.Calls, call)
}

func parseChunks(raw string) ([]map[string]any, error) {
	if raw == "" {
		return nil, nil
	}
	var cs []map[string]any
	err := json.Unmarshal([]byte(raw), &cs)
	return cs, err
}

// Streams returns every streamed message, in the order started.
func (s *Server) Streams() []Stream {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Stream, 0, len(s.agent.streams))
	for _, st := range s.agent.streams {
		c := *st
		c.Tasks = slices.Clone(st.Tasks)
		c.Calls = slices.Clone(st.Calls)
		out = append(out, c)
	}
	return out
}

// Statuses returns every accepted assistant.threads.setStatus, in order.
func (s *Server) Statuses() []StatusCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.agent.statuses)
}

// StatusSet returns a channel closed once a thread's status is set to
// status (at once when it already was).
func (s *Server) StatusSet(status string) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := make(chan struct{})
	for _, st := range s.agent.statuses {
		if st.Status == status {
			close(c)
			return c
		}
	}
	if s.agent.waiters == nil {
		s.agent.waiters = map[string][]chan struct{}{}
	}
	s.agent.waiters[status] = append(s.agent.waiters[status], c)
	return c
}

// SuggestedPrompts returns every accepted setSuggestedPrompts, in order.
func (s *Server) SuggestedPrompts() []Prompts {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.agent.prompts)
}

// Titles returns every accepted assistant.threads.setTitle, in order.
func (s *Server) Titles() []Title {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.agent.titles)
}

// AssistantThreadStartedEvent is the event Slack sends when someone opens
// the app's assistant panel: a new DM thread with the bot.
func (s *Server) AssistantThreadStartedEvent(user, channel, threadTS, contextChannel string) map[string]any {
	return map[string]any{
		"type": "assistant_thread_started", "event_ts": threadTS,
		"assistant_thread": map[string]any{
			"user_id": user, "channel_id": channel, "thread_ts": threadTS,
			"context": map[string]any{"channel_id": contextChannel, "team_id": s.cfg.TeamID},
		},
	}
}
