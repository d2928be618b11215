package discordfake

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"
)

// Application commands: PUT/GET applications/{app}/commands (global bulk
// overwrite), INTERACTION_CREATE of type 2, and the original response of
// an interaction (type 5 creates it in its loading state; GET and PATCH
// webhooks/{app}/{token}/messages/@original read and finish it).

// Message flags the fake sets on an interaction's original response.
const (
	FlagEphemeral = 1 << 6
	FlagLoading   = 1 << 7
)

// Command is a registered application command, as PUT.
type Command struct {
	ID          string          `json:"id"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Type        int             `json:"type,omitempty"`
	Options     json.RawMessage `json:"options,omitempty"`
	Contexts    []int           `json:"contexts,omitempty"`
}

// Slash is one use of a registered chat command for Slash.
type Slash struct {
	Channel string
	User    User
	// Command is the command's name (default "marlowe"), Sub its
	// subcommand and Options the subcommand's options (name → string
	// value), as Discord sends them.
	Command, Sub string
	Options      map[string]string
	// AlsoUser, in a guild, adds a top-level "user" object next to
	// "member" (Discord sends only one of them): a forged shape.
	AlsoUser *User
}

// putCommandsLocked is PUT applications/{app}/commands: the list replaces
// every global command (ids are kept for names registered before).
func (s *Server) putCommandsLocked(app string, body []byte) (int, any) {
	if app != s.cfg.ApplicationID {
		return http.StatusForbidden, apiError{"Missing Access", 50001}
	}
	var in []Command
	if err := json.Unmarshal(body, &in); err != nil {
		return 400, apiError{"Invalid Form Body", 50035}
	}
	old := map[string]string{}
	for _, c := range s.commands {
		old[c.Name] = c.ID
	}
	s.commands = nil
	for _, c := range in {
		if c.Name == "" || c.Description == "" || strings.ToLower(c.Name) != c.Name {
			return 400, apiError{"Invalid Form Body", 50035}
		}
		c.ID = old[c.Name]
		if c.ID == "" {
			c.ID = s.nextIDLocked()
		}
		s.commands = append(s.commands, c)
	}
	s.commandPuts++
	return 200, s.commands
}

// Commands returns the registered global commands.
func (s *Server) Commands() []Command {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Command(nil), s.commands...)
}

// CommandPutsLocked counts bulk overwrites, for a Wait condition.
func (s *Server) CommandPutsLocked() int { return s.commandPuts }

// Slash dispatches INTERACTION_CREATE for a chat command and returns the
// interaction id, or "" when no command of that name is registered
// (Discord offers only registered commands). Its token is "tok-<id>".
func (s *Server) Slash(k Slash) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.notifyLocked()
	id, js := s.slashLocked(k)
	if js != nil {
		s.gw.dispatchLocked("INTERACTION_CREATE", js)
	}
	return id
}

// SlashPayload is Slash for an HTTP interactions endpoint: it returns the
// interaction's body instead of dispatching it, for the test to sign and
// POST; Responded then applies the endpoint's answer.
func (s *Server) SlashPayload(k Slash) (string, []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.notifyLocked()
	id, js := s.slashLocked(k)
	if js == nil {
		return "", nil
	}
	b, _ := json.Marshal(js)
	return id, b
}

// Responded records what an HTTP interactions endpoint answered to
// interaction id (its response type and flags), as Discord would on reading
// the response body.
func (s *Server) Responded(id string, typ, flags int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.notifyLocked()
	body, _ := json.Marshal(map[string]any{"type": typ, "data": map[string]any{"flags": flags}})
	s.callbackLocked(id, "tok-"+id, body)
}

func (s *Server) slashLocked(k Slash) (string, map[string]any) {
	if k.Command == "" {
		k.Command = "marlowe"
	}
	var cmd *Command
	for i := range s.commands {
		if s.commands[i].Name == k.Command {
			cmd = &s.commands[i]
		}
	}
	if cmd == nil {
		return "", nil
	}
	id := s.nextIDLocked()
	s.clickAt[id] = time.Now()
	s.slashChan[id] = k.Channel
	var opts []map[string]any
	for name, v := range k.Options {
		opts = append(opts, map[string]any{"type": 3, "name": name, "value": v})
	}
	data := map[string]any{"id": cmd.ID, "name": cmd.Name, "type": 1}
	if k.Sub != "" {
		sub := map[string]any{"type": 1, "name": k.Sub}
		if opts != nil {
			sub["options"] = opts
		}
		data["options"] = []any{sub}
	} else if opts != nil {
		data["options"] = opts
	}
	js := map[string]any{
		"id": id, "application_id": s.cfg.ApplicationID, "type": 2, "token": "tok-" + id, "version": 1,
		"channel_id": k.Channel, "data": data, "locale": "en-US",
	}
	s.users[k.User.ID] = k.User
	if c := s.channels[k.Channel]; c != nil && c.guild != "" {
		js["guild_id"] = c.guild
		js["context"] = 0
		js["member"] = map[string]any{"user": k.User, "roles": []string{}, "permissions": "0"}
		if k.AlsoUser != nil {
			js["user"] = *k.AlsoUser
		}
	} else {
		js["context"] = 1
		js["user"] = k.User
	}
	return id, js
}

// deferLocked creates the original response of a type 5 callback: in its
// channel, unless it is ephemeral (then only its user sees it).
func (s *Server) deferLocked(id string, flags int) {
	ch := s.slashChan[id]
	m := &Message{ID: s.nextIDLocked(), ChannelID: ch, Author: s.cfg.Bot, Type: 20, Flags: flags&FlagEphemeral | FlagLoading, At: time.Now()}
	if c := s.channels[ch]; c != nil {
		m.GuildID = c.guild
		if flags&FlagEphemeral == 0 {
			c.msgs = append(c.msgs, m)
		}
	}
	s.originals[id] = m
}

// originalLocked serves GET and PATCH webhooks/{app}/{token}/messages/@original.
func (s *Server) originalLocked(method, app, token string, body []byte) (int, any) {
	id := strings.TrimPrefix(token, "tok-")
	at, ok := s.clickAt[id]
	if app != s.cfg.ApplicationID || !ok || time.Since(at) > 15*time.Minute {
		return notFound(10015, "Webhook")
	}
	m := s.originals[id]
	if m == nil {
		return notFound(10008, "Message")
	}
	if method == http.MethodGet {
		return 200, s.messageJSONLocked(m)
	}
	var req struct {
		Content string `json:"content"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return 400, apiError{"Invalid Form Body", 50035}
	}
	if n := utf16Len(req.Content); n > 2000 {
		return 400, apiError{"content: Must be 2000 or fewer in length.", 50035}
	}
	if req.Content == "" {
		return 400, apiError{"Cannot send an empty message", 50006}
	}
	m.Content, m.Flags = req.Content, m.Flags&^FlagLoading
	s.followups = append(s.followups, Followup{InteractionID: id, Content: req.Content, Flags: m.Flags, At: time.Now(), Original: true})
	return 200, s.messageJSONLocked(m)
}

// Original returns an interaction's original response (nil before it is
// deferred or answered).
func (s *Server) Original(interaction string) *Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.OriginalLocked(interaction)
}

// OriginalLocked is Original for use inside a Wait condition.
func (s *Server) OriginalLocked(interaction string) *Message {
	if m := s.originals[interaction]; m != nil {
		c := *m
		return &c
	}
	return nil
}
