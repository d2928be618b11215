package discordfake

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"
)

// Ping is a mass mention Discord would have notified: @everyone or @here,
// or a role, in a message body whose allowed_mentions permitted it (or
// had none: Discord then parses every mention in the content).
type Ping struct {
	Method, Path string
	What         string // "everyone", "here" or "role <id>"
}

var roleMention = regexp.MustCompile(`<@&(\d+)>`)

// PingsOf is what Discord would notify for a request with body: tests
// check the fake's reading with it.
func PingsOf(method, path string, body []byte) []Ping { return pingsOf(method, path, body) }

// pingsOf reads a message body as Discord does: a create, an edit, a
// follow-up, or an interaction callback (its data).
func pingsOf(method, path string, body []byte) []Ping {
	var msg struct {
		Content         *string `json:"content"`
		AllowedMentions *struct {
			Parse []string `json:"parse"`
			Roles []string `json:"roles"`
		} `json:"allowed_mentions"`
		Data json.RawMessage `json:"data"`
	}
	if len(body) == 0 || json.Unmarshal(body, &msg) != nil {
		return nil
	}
	if msg.Content == nil && len(msg.Data) > 0 && strings.HasPrefix(path, "interactions/") {
		return pingsOf(method, path, msg.Data)
	}
	if msg.Content == nil {
		return nil
	}
	all := msg.AllowedMentions == nil
	everyone, roles := all, all
	var allowedRoles []string
	if !all {
		everyone = slices.Contains(msg.AllowedMentions.Parse, "everyone")
		roles = slices.Contains(msg.AllowedMentions.Parse, "roles")
		allowedRoles = msg.AllowedMentions.Roles
	}
	var out []Ping
	c := *msg.Content
	if everyone && strings.Contains(c, "@everyone") {
		out = append(out, Ping{method, path, "everyone"})
	}
	if everyone && strings.Contains(c, "@here") {
		out = append(out, Ping{method, path, "here"})
	}
	for _, m := range roleMention.FindAllStringSubmatch(c, -1) {
		if roles || slices.Contains(allowedRoles, m[1]) {
			out = append(out, Ping{method, path, "role " + m[1]})
		}
	}
	return out
}

// Pings lists every mass mention the bot's requests would have notified.
func (s *Server) Pings() []Ping {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Ping(nil), s.pings...)
}
