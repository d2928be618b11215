package slackfake

import (
	"strings"
	"time"
)

// Ephemeral is one accepted chat.postEphemeral: a message only User sees.
type Ephemeral struct {
	Channel  string
	ThreadTS string
	User     string
	Text     string
	At       time.Time
}

func (s *Server) userLocked(id string) (User, bool) {
	if id == s.cfg.BotUserID {
		return User{ID: id, Name: s.cfg.BotHandle, RealName: s.cfg.BotName, DisplayName: s.cfg.BotName, IsBot: true}, true
	}
	for _, u := range s.cfg.Users {
		if u.ID == id {
			return u, true
		}
	}
	return User{}, false
}

// usersInfo answers users.info with the member's roles.
func (s *Server) usersInfo(r apiReq) any {
	s.mu.Lock()
	u, ok := s.userLocked(r.form.Get("user"))
	if !ok {
		u, ok = s.authorLocked(r.form.Get("user"))
	}
	s.mu.Unlock()
	if !ok {
		return fail("user_not_found")
	}
	return map[string]any{"ok": true, "user": map[string]any{
		"id": u.ID, "team_id": s.cfg.TeamID, "name": u.Name, "real_name": u.RealName, "deleted": u.Deleted,
		"is_bot": u.IsBot, "is_admin": u.IsAdmin, "is_owner": u.IsOwner, "is_primary_owner": u.IsPrimaryOwner,
		"is_restricted": u.IsRestricted, "is_ultra_restricted": false,
		"profile": map[string]any{"display_name": u.DisplayName, "real_name": u.RealName},
	}}
}

// postEphemeral answers chat.postEphemeral. Like Slack it stores nothing in
// the channel: the message is only recorded for Ephemerals.
func (s *Server) postEphemeral(r apiReq) any {
	ch, user, text := r.form.Get("channel"), r.form.Get("user"), r.form.Get("text")
	if ch == "" {
		return fail("channel_not_found")
	}
	if user == "" {
		return fail("user_not_in_channel")
	}
	if text == "" && r.form.Get("blocks") == "" {
		return fail("no_text")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ts := s.nextTSLocked()
	s.ephemerals = append(s.ephemerals, Ephemeral{Channel: ch, ThreadTS: r.form.Get("thread_ts"), User: user, Text: text, At: time.Now()})
	return map[string]any{"ok": true, "message_ts": ts}
}

// Ephemerals returns every accepted chat.postEphemeral, in order.
func (s *Server) Ephemerals() []Ephemeral {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Ephemeral(nil), s.ephemerals...)
}

// SetUser adds a workspace member or replaces the one with the same id
// (e.g. to demote an admin mid-test).
func (s *Server) SetUser(u User) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.cfg.Users {
		if s.cfg.Users[i].ID == u.ID {
			s.cfg.Users[i] = u
			return
		}
	}
	s.cfg.Users = append(s.cfg.Users, u)
}

// getPermalink answers chat.getPermalink for a message the fake holds, in
// Slack's URL shape.
func (s *Server) getPermalink(r apiReq) any {
	ch, ts := r.form.Get("channel"), r.form.Get("message_ts")
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.findLocked(ch, ts) == nil {
		return fail("message_not_found")
	}
	return map[string]any{"ok": true, "channel": ch,
		"permalink": "https://fake.slack.com/archives/" + ch + "/p" + strings.ReplaceAll(ts, ".", "")}
}
