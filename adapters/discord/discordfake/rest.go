package discordfake

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The REST half of the fake: routing, messages, threads, interactions.

type apiError struct {
	Message string `json:"message"`
	Code    int    `json:"code"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	if v != nil {
		_ = json.NewEncoder(w).Encode(v)
	}
}

func (s *Server) serveREST(w http.ResponseWriter, r *http.Request) {
	path := strings.TrimPrefix(r.URL.Path, "/api/v10/")
	body, _ := io.ReadAll(r.Body)
	body, ups := splitMultipart(r, body) // files.go
	if tok := strings.TrimPrefix(r.Header.Get("Authorization"), "Bot "); !strings.HasPrefix(r.Header.Get("Authorization"), "Bot ") || (s.cfg.Token != "" && tok != s.cfg.Token) {
		if !strings.HasPrefix(path, "interactions/") {
			s.record(r.Method, path, http.StatusUnauthorized)
			writeJSON(w, http.StatusUnauthorized, apiError{"401: Unauthorized", 0})
			return
		}
	}
	s.mu.Lock()
	var hit *rule
	for _, ru := range s.rules {
		if ru.n > 0 && ru.method == r.Method && strings.HasPrefix(path, ru.prefix) {
			ru.n--
			hit = ru
			break
		}
	}
	s.mu.Unlock()
	if hit != nil && hit.stall != nil {
		close(hit.entered)
		select {
		case <-hit.stall:
		case <-r.Context().Done():
		}
	}
	if hit != nil && hit.status == http.StatusTooManyRequests {
		secs := hit.retryAfter.Seconds()
		h := w.Header()
		h.Set("X-RateLimit-Limit", "5")
		h.Set("X-RateLimit-Remaining", "0")
		h.Set("X-RateLimit-Reset-After", strconv.FormatFloat(secs, 'f', 3, 64))
		h.Set("Retry-After", strconv.FormatFloat(secs, 'f', 3, 64))
		h.Set("X-RateLimit-Bucket", "fakebucket")
		if hit.global {
			h.Set("X-RateLimit-Global", "true")
			h.Set("X-RateLimit-Scope", "global")
		} else {
			h.Set("X-RateLimit-Scope", "user")
		}
		s.record(r.Method, path, http.StatusTooManyRequests)
		writeJSON(w, http.StatusTooManyRequests, map[string]any{"message": "You are being rate limited.", "retry_after": secs, "global": hit.global})
		return
	}
	if ok, retry := s.takeBucket(w.Header(), r.Method, path); !ok {
		secs := retry.Seconds()
		w.Header().Set("Retry-After", strconv.FormatFloat(secs, 'f', 3, 64))
		w.Header().Set("X-RateLimit-Scope", "user")
		s.record(r.Method, path, http.StatusTooManyRequests)
		writeJSON(w, http.StatusTooManyRequests, map[string]any{"message": "You are being rate limited.", "retry_after": secs, "global": false})
		return
	}
	if hit != nil && hit.spend > 0 {
		w.Header().Set("X-RateLimit-Remaining", "0")
		w.Header().Set("X-RateLimit-Reset-After", resetAfter(hit.spend))
	}
	status, out := s.route(r.Method, path, r.URL.Query(), body)
	if status == http.StatusOK {
		s.recordFiles(out, ups)
	}
	if status < 300 {
		if p := pingsOf(r.Method, path, body); len(p) > 0 {
			s.mu.Lock()
			s.pings = append(s.pings, p...)
			s.mu.Unlock()
		}
	}
	s.record(r.Method, path, status)
	if hit != nil && hit.lose {
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				_ = conn.Close()
				return
			}
		}
	}
	if status == http.StatusNoContent {
		w.WriteHeader(status)
		return
	}
	writeJSON(w, status, out)
}

func (s *Server) record(method, path string, status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, Call{Method: method, Path: path, Status: status, At: time.Now()})
	s.notifyLocked()
}

func notFound(code int, what string) (int, any) {
	return http.StatusNotFound, apiError{"Unknown " + what, code}
}

func (s *Server) route(method, path string, q url.Values, body []byte) (int, any) {
	parts := strings.Split(path, "/")
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.notifyLocked()
	switch {
	case method == "GET" && (path == "gateway/bot" || path == "gateway"):
		return 200, map[string]any{"url": s.wsURL("/gateway"), "shards": 1,
			"session_start_limit": map[string]int{"total": 1000, "remaining": 999, "reset_after": 0, "max_concurrency": 1}}
	case method == "GET" && path == "users/@me":
		return 200, s.cfg.Bot
	case method == "GET" && path == "applications/@me":
		flags := 1 << 19 // GATEWAY_MESSAGE_CONTENT_LIMITED: on, for an unverified bot
		if s.cfg.NoMessageContent {
			flags = 0
		}
		return 200, map[string]any{"id": s.cfg.ApplicationID, "name": s.cfg.Bot.Username, "flags": flags, "bot_public": false}
	case method == "POST" && path == "users/@me/channels":
		var req struct {
			RecipientID string `json:"recipient_id"`
		}
		_ = json.Unmarshal(body, &req)
		if req.RecipientID == "" {
			return 400, apiError{"Invalid Form Body", 50035}
		}
		id := "9" + req.RecipientID[1:]
		if _, ok := s.channels[id]; !ok {
			s.channels[id] = &chanState{Channel: Channel{ID: id, Type: TypeDM, Recipients: []string{req.RecipientID}}}
		}
		return 200, s.channelJSONLocked(s.channels[id])
	case len(parts) >= 2 && parts[0] == "channels":
		return s.routeChannel(method, parts[1:], q, body)
	case method == "GET" && len(parts) == 2 && parts[0] == "guilds":
		g := s.guilds[parts[1]]
		if g == nil {
			return notFound(10004, "Guild")
		}
		return 200, s.guildJSONLocked(g)
	case method == "GET" && len(parts) == 4 && parts[0] == "guilds" && parts[2] == "members":
		g := s.guilds[parts[1]]
		if g == nil {
			return notFound(10004, "Guild")
		}
		for _, m := range g.Members {
			if m.UserID == parts[3] {
				return 200, map[string]any{"user": s.userLocked(m.UserID), "roles": nonNil(m.Roles)}
			}
		}
		if parts[3] == g.OwnerID {
			return 200, map[string]any{"user": s.userLocked(g.OwnerID), "roles": []string{}}
		}
		return notFound(10007, "Member")
	case method == "POST" && len(parts) == 4 && parts[0] == "interactions" && parts[3] == "callback":
		return s.callbackLocked(parts[1], parts[2], body)
	case method == "POST" && len(parts) == 3 && parts[0] == "webhooks":
		return s.followupLocked(parts[1], parts[2], body)
	case (method == "GET" || method == "PATCH") && len(parts) == 5 && parts[0] == "webhooks" && parts[3] == "messages" && parts[4] == "@original":
		return s.originalLocked(method, parts[1], parts[2], body)
	case method == "PUT" && len(parts) == 3 && parts[0] == "applications" && parts[2] == "commands":
		return s.putCommandsLocked(parts[1], body)
	case method == "GET" && len(parts) == 3 && parts[0] == "applications" && parts[2] == "commands":
		return 200, append([]Command{}, s.commands...)
	}
	return notFound(0, "route "+method+" "+path)
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func (s *Server) userLocked(id string) User {
	if u, ok := s.users[id]; ok {
		return u
	}
	return User{ID: id, Username: "user" + id}
}

func (s *Server) routeChannel(method string, p []string, q url.Values, body []byte) (int, any) {
	c := s.channels[p[0]]
	if c == nil {
		return notFound(10003, "Channel")
	}
	switch {
	case method == "GET" && len(p) == 1:
		return 200, s.channelJSONLocked(c)
	case method == "GET" && len(p) == 3 && p[1] == "thread-members":
		// Discord answers 10007 Unknown Member for a user not in the thread.
		if !slices.Contains(c.Members, p[2]) {
			return notFound(10007, "Member")
		}
		return 200, map[string]any{"id": c.ID, "user_id": p[2], "join_timestamp": "2026-01-01T00:00:00.000000+00:00", "flags": 0}
	case method == "GET" && len(p) == 2 && p[1] == "messages":
		limit, _ := strconv.Atoi(q.Get("limit"))
		if limit <= 0 || limit > 100 {
			limit = 50
		}
		var out []any
		if after := q.Get("after"); after != "" {
			// The limit messages right after it, newest first as Discord
			// sends them.
			var got []*Message
			for _, m := range c.msgs {
				if idLess(after, m.ID) && len(got) < limit {
					got = append(got, m)
				}
			}
			for i := len(got) - 1; i >= 0; i-- {
				out = append(out, s.messageJSONLocked(got[i]))
			}
		}
		for i := len(c.msgs) - 1; q.Get("after") == "" && i >= 0 && len(out) < limit; i-- {
			out = append(out, s.messageJSONLocked(c.msgs[i]))
		}
		if out == nil {
			out = []any{}
		}
		return 200, out
	case method == "GET" && len(p) == 3 && p[1] == "messages":
		if m := c.find(p[2]); m != nil {
			return 200, s.messageJSONLocked(m)
		}
		return notFound(10008, "Message")
	case method == "POST" && len(p) == 2 && p[1] == "messages":
		return s.createLocked(c, body)
	case method == "PATCH" && len(p) == 3 && p[1] == "messages":
		m := c.find(p[2])
		if m == nil {
			return notFound(10008, "Message")
		}
		if m.Author.ID != s.cfg.Bot.ID {
			return 403, apiError{"Cannot edit a message authored by another user", 50005}
		}
		var req struct {
			Content    *string         `json:"content"`
			Components json.RawMessage `json:"components"`
		}
		if err := json.Unmarshal(body, &req); err != nil {
			return 400, apiError{"Invalid Form Body", 50035}
		}
		if req.Content != nil {
			if n := utf16Len(*req.Content); n > 2000 {
				return 400, apiError{fmt.Sprintf("content: Must be 2000 or fewer in length (%d)", n), 50035}
			}
			m.Content = *req.Content
		}
		if req.Components != nil {
			m.Components = req.Components
		}
		s.edits = append(s.edits, Edit{ChannelID: c.ID, MessageID: m.ID, Content: m.Content, Components: m.Components, At: time.Now()})
		return 200, s.messageJSONLocked(m)
	case method == "POST" && len(p) == 4 && p[1] == "messages" && p[3] == "threads":
		m := c.find(p[2])
		if m == nil {
			return notFound(10008, "Message")
		}
		if _, ok := s.channels[m.ID]; ok {
			return 400, apiError{"A thread has already been created for this message", 160004}
		}
		var req struct {
			Name string `json:"name"`
		}
		_ = json.Unmarshal(body, &req)
		if req.Name == "" || len([]rune(req.Name)) > 100 {
			return 400, apiError{"name: Must be between 1 and 100 in length.", 50035}
		}
		th := &chanState{Channel: Channel{ID: m.ID, Type: TypePublicThread, Name: req.Name, Parent: c.ID}, guild: c.guild}
		s.channels[th.ID] = th
		s.threads = append(s.threads, th.ID)
		js := s.channelJSONLocked(th)
		s.gw.dispatchLocked("THREAD_CREATE", js)
		return 201, js
	case method == "POST" && len(p) == 2 && p[1] == "typing":
		s.typings = append(s.typings, Typing{ChannelID: c.ID, At: time.Now()})
		return http.StatusNoContent, nil
	case method == "PUT" && len(p) == 6 && p[1] == "messages" && p[3] == "reactions" && p[5] == "@me":
		if c.find(p[2]) == nil {
			return notFound(10008, "Message")
		}
		s.reactions = append(s.reactions, Reaction{ChannelID: c.ID, MessageID: p[2], Emoji: p[4]})
		return http.StatusNoContent, nil
	}
	return notFound(0, "route")
}

// idLess orders snowflakes.
func idLess(a, b string) bool {
	if len(a) != len(b) {
		return len(a) < len(b)
	}
	return a < b
}

func (c *chanState) find(id string) *Message {
	for _, m := range c.msgs {
		if m.ID == id {
			return m
		}
	}
	return nil
}

func utf16Len(s string) int {
	n := 0
	for _, r := range s {
		if r >= 0x10000 {
			n += 2
		} else {
			n++
		}
	}
	return n
}

// createLocked is POST channels/{id}/messages by the bot.
func (s *Server) createLocked(c *chanState, body []byte) (int, any) {
	var req struct {
		Content      string          `json:"content"`
		Components   json.RawMessage `json:"components"`
		Nonce        string          `json:"nonce"`
		EnforceNonce bool            `json:"enforce_nonce"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return 400, apiError{"Invalid Form Body", 50035}
	}
	if n := utf16Len(req.Content); n > 2000 {
		return 400, apiError{fmt.Sprintf("content: Must be 2000 or fewer in length (%d)", n), 50035}
	}
	if len(req.Nonce) > 25 {
		return 400, apiError{"nonce: Must be 25 or fewer in length.", 50035}
	}
	if req.Content == "" && (len(req.Components) == 0 || string(req.Components) == "null") {
		return 400, apiError{"Cannot send an empty message", 50006}
	}
	if err := checkComponents(req.Components); err != nil {
		return 400, apiError{err.Error(), 50035}
	}
	if req.EnforceNonce && req.Nonce != "" {
		if id, ok := s.nonces[c.ID+"/"+req.Nonce]; ok {
			return 200, s.messageJSONLocked(c.find(id))
		}
	}
	m := &Message{ID: s.nextIDLocked(), ChannelID: c.ID, GuildID: c.guild, Author: s.cfg.Bot, Content: req.Content,
		Components: req.Components, Nonce: req.Nonce, At: time.Now()}
	c.msgs = append(c.msgs, m)
	if req.Nonce != "" {
		s.nonces[c.ID+"/"+req.Nonce] = m.ID
	}
	s.posts = append(s.posts, *m)
	js := s.messageJSONLocked(m)
	if s.cfg.EchoPosts {
		s.gw.dispatchLocked("MESSAGE_CREATE", js)
	}
	return 200, js
}

// checkComponents enforces Discord's limits on action rows of buttons.
func checkComponents(raw json.RawMessage) error {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var rows []struct {
		Type       int `json:"type"`
		Components []struct {
			Type     int    `json:"type"`
			CustomID string `json:"custom_id"`
			Label    string `json:"label"`
		} `json:"components"`
	}
	if err := json.Unmarshal(raw, &rows); err != nil {
		return fmt.Errorf("components: %v", err)
	}
	if len(rows) > 5 {
		return fmt.Errorf("components: Must be 5 or fewer in length")
	}
	seen := map[string]bool{}
	for _, r := range rows {
		if r.Type != 1 || len(r.Components) == 0 || len(r.Components) > 5 {
			return fmt.Errorf("components: action rows hold 1 to 5 buttons")
		}
		for _, b := range r.Components {
			if b.Type != 2 || b.CustomID == "" || len(b.CustomID) > 100 || len([]rune(b.Label)) > 80 || seen[b.CustomID] {
				return fmt.Errorf("components: invalid button (custom_id %q)", b.CustomID)
			}
			seen[b.CustomID] = true
		}
	}
	return nil
}

func (s *Server) channelJSONLocked(c *chanState) map[string]any {
	js := map[string]any{"id": c.ID, "type": c.Type, "name": c.Name, "last_message_id": nil}
	if n := len(c.msgs); n > 0 {
		// As Discord: the id of the channel's newest message (ids grow
		// with time, so it says when the channel last had one).
		js["last_message_id"] = c.msgs[n-1].ID
	}
	if c.guild != "" {
		js["guild_id"] = c.guild
		ow := []any{}
		if c.Private {
			ow = append(ow, map[string]any{"id": c.guild, "type": 0, "allow": "0", "deny": strconv.FormatInt(PermViewChannel, 10)})
		}
		for _, o := range c.Overwrites {
			typ := 0
			if o.Member {
				typ = 1
			}
			ow = append(ow, map[string]any{"id": o.ID, "type": typ, "allow": strconv.FormatInt(o.Allow, 10), "deny": strconv.FormatInt(o.Deny, 10)})
		}
		js["permission_overwrites"] = ow
	}
	if c.Parent != "" {
		js["parent_id"] = c.Parent
	}
	if c.guild == "" {
		rs := []any{}
		for _, id := range c.Recipients {
			rs = append(rs, s.userLocked(id))
		}
		js["recipients"] = rs
	}
	return js
}

func (s *Server) guildJSONLocked(g *Guild) map[string]any {
	roles := []any{}
	for _, r := range g.Roles {
		roles = append(roles, roleJSON(g.ID, r))
	}
	return map[string]any{"id": g.ID, "name": "guild" + g.ID, "owner_id": g.OwnerID, "roles": roles}
}

func roleJSON(guild string, r Role) map[string]any {
	name := "role" + r.ID
	if r.ID == guild {
		name = "@everyone"
	}
	js := map[string]any{"id": r.ID, "name": name, "permissions": strconv.FormatInt(r.Permissions, 10), "managed": r.BotID != ""}
	if r.BotID != "" {
		js["tags"] = map[string]any{"bot_id": r.BotID}
	}
	return js
}

func (s *Server) messageJSONLocked(m *Message) map[string]any {
	js := map[string]any{
		"id": m.ID, "channel_id": m.ChannelID, "author": m.Author, "content": m.Content, "type": m.Type,
		"timestamp": m.At.UTC().Format(time.RFC3339Nano), "edited_timestamp": nil, "tts": false,
		"mention_everyone": false, "mentions": []any{}, "mention_roles": []any{}, "attachments": []any{},
		"embeds": []any{}, "pinned": false,
	}
	if m.GuildID != "" {
		js["guild_id"] = m.GuildID
	}
	if m.mentions != nil {
		js["mentions"], js["mention_roles"], js["mention_everyone"] = m.mentions, m.roles, m.everyone
	}
	if len(m.Components) > 0 {
		js["components"] = m.Components
	}
	if m.Nonce != "" {
		js["nonce"] = m.Nonce
	}
	if len(m.attachments) > 0 {
		js["attachments"] = m.attachments
	}
	if m.Flags != 0 {
		js["flags"] = m.Flags
	}
	return js
}

// followupLocked is POST webhooks/{application id}/{interaction token}:
// valid for 15 minutes, and only after the initial response.
func (s *Server) followupLocked(app, token string, body []byte) (int, any) {
	id := strings.TrimPrefix(token, "tok-")
	at, ok := s.clickAt[id]
	if app != s.cfg.ApplicationID || !ok || time.Since(at) > 15*time.Minute {
		return notFound(10015, "Webhook")
	}
	if !s.answered[id] {
		return 400, apiError{"Interaction has not been acknowledged.", 40060}
	}
	var req struct {
		Content string `json:"content"`
		Flags   int    `json:"flags"`
	}
	if err := json.Unmarshal(body, &req); err != nil || req.Content == "" {
		return 400, apiError{"Cannot send an empty message", 50006}
	}
	s.followups = append(s.followups, Followup{InteractionID: id, Content: req.Content, Flags: req.Flags, At: time.Now()})
	return http.StatusNoContent, nil
}

func (s *Server) callbackLocked(id, token string, body []byte) (int, any) {
	at, ok := s.clickAt[id]
	if !ok || token != "tok-"+id {
		return notFound(10062, "interaction")
	}
	if s.answered[id] {
		return 400, apiError{"Interaction has already been acknowledged.", 40060}
	}
	var req struct {
		Type int `json:"type"`
		Data struct {
			Content string `json:"content"`
			Flags   int    `json:"flags"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &req); err != nil || req.Type == 0 {
		return 400, apiError{"Invalid Form Body", 50035}
	}
	now := time.Now()
	if now.Sub(at) > 3*time.Second {
		return notFound(10062, "interaction") // Discord: the token expired for an initial response
	}
	s.answered[id] = true
	if req.Type == 5 {
		s.deferLocked(id, req.Data.Flags)
	}
	s.callbacks = append(s.callbacks, Callback{InteractionID: id, Type: req.Type, Content: req.Data.Content, Flags: req.Data.Flags, At: now, Latency: now.Sub(at)})
	return http.StatusNoContent, nil
}
