package slackfake

import "strings"

// dmUser is the person of DM ch (conversations.info's user), "" for
// another kind of conversation.
func (s *Server) dmUser(ch, kind string) string {
	if kind != "im" {
		return ""
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if m := s.cfg.Members[ch]; len(m) > 0 {
		return m[0]
	}
	return "U" + strings.TrimPrefix(ch, "D")
}

// conversationsMembers answers conversations.members from Config.Members
// (one page); a DM's member is its person.
func (s *Server) conversationsMembers(r apiReq) any {
	ch := r.form.Get("channel")
	s.mu.Lock()
	kind := s.channelTypeLocked(ch)
	members, ok := s.cfg.Members[ch]
	s.mu.Unlock()
	if !ok && kind == "im" {
		members = []string{s.dmUser(ch, kind)}
	}
	return map[string]any{"ok": true, "members": append([]string{}, members...), "response_metadata": map[string]any{"next_cursor": ""}}
}

// SetMembers replaces a channel's members (a person joined or left).
func (s *Server) SetMembers(ch string, members ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cfg.Members == nil {
		s.cfg.Members = map[string][]string{}
	}
	s.cfg.Members[ch] = members
}

// authorLocked is a person who is not in Config.Users but has written in
// the workspace: a full member, as everyone who writes is on Slack.
func (s *Server) authorLocked(id string) (User, bool) {
	for _, ms := range s.messages {
		for _, m := range ms {
			if m.User == id && id != "" {
				return User{ID: id, Name: id}, true
			}
		}
	}
	return User{}, false
}
