// Package discordfake is a local, in-process stand-in for the parts of
// Discord that Marlowe uses, so the real discordgo session can be tested
// against it: REST (gateway/bot, users/@me, channels, messages with
// nonce/enforce_nonce, threads from messages, reactions, DMs, guilds and
// members, interaction callbacks) and a gateway WebSocket speaking
// HELLO / IDENTIFY / READY / HEARTBEAT / RESUME / RECONNECT /
// INVALID_SESSION / DISPATCH, replaying after the resumed sequence at a
// separate resume_gateway_url. Payloads follow Discord's documented shapes.
// It listens on loopback only.
package discordfake

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Discord's permission bits the fake knows.
const (
	PermViewChannel   = int64(1) << 10
	PermAdministrator = int64(1) << 3
	PermManageGuild   = int64(1) << 5
)

// Channel types.
const (
	TypeText          = 0
	TypeDM            = 1
	TypePublicThread  = 11
	TypePrivateThread = 12
)

// User is an account.
type User struct {
	ID         string `json:"id"`
	Username   string `json:"username"`
	GlobalName string `json:"global_name,omitempty"`
	Bot        bool   `json:"bot,omitempty"`
}

// Channel is a guild channel, thread or DM.
type Channel struct {
	ID      string
	Type    int
	Name    string
	Parent  string // threads
	Private bool   // @everyone is denied VIEW_CHANNEL
}

// Role is a guild role.
type Role struct {
	ID          string
	Permissions int64
}

// Member is a guild member's roles.
type Member struct {
	UserID string
	Roles  []string
}

// Guild is a server with its channels, roles (the @everyone role, whose id
// is the guild's, is added when missing) and members.
type Guild struct {
	ID       string
	OwnerID  string
	Channels []Channel
	Roles    []Role
	Members  []Member
}

// Config describes the fake. Zero values get defaults.
type Config struct {
	Bot           User   // default id 100000000000000001, "marlowe"
	ApplicationID string // default 100000000000000002
	// Token, when set, is the only bot token accepted ("Bot <token>").
	Token  string
	Guilds []Guild
	// HeartbeatInterval sent in HELLO (default 1s).
	HeartbeatInterval time.Duration
	// EchoPosts dispatches MESSAGE_CREATE for the bot's own posts, as
	// Discord does.
	EchoPosts bool
	// ReplayOverlap replays this many events at or before the resumed
	// sequence as well, so a client must drop what it already has.
	ReplayOverlap int
}

// Message is a stored message.
type Message struct {
	ID         string          `json:"id"`
	ChannelID  string          `json:"channel_id"`
	GuildID    string          `json:"guild_id,omitempty"`
	Author     User            `json:"author"`
	Content    string          `json:"content"`
	Type       int             `json:"type"`
	Components json.RawMessage `json:"components,omitempty"`
	Nonce      string          `json:"nonce,omitempty"`
	At         time.Time       `json:"-"`
}

// Edit is one accepted PATCH of a message.
type Edit struct {
	ChannelID, MessageID, Content string
	Components                    json.RawMessage
	At                            time.Time
}

// Callback is one interaction response.
type Callback struct {
	InteractionID string
	Type          int
	Content       string
	Flags         int
	At            time.Time
	// Latency is the time from the INTERACTION_CREATE dispatch.
	Latency time.Duration
}

// Followup is one message sent on an interaction's token after its initial
// response.
type Followup struct {
	InteractionID string
	Content       string
	Flags         int
	At            time.Time
}

// Call is one REST request as answered.
type Call struct {
	Method, Path string
	Status       int
	At           time.Time
}

// Reaction is one PUT …/reactions/{emoji}/@me.
type Reaction struct{ ChannelID, MessageID, Emoji string }

type rule struct {
	method, prefix string
	n              int
	status         int
	retryAfter     time.Duration
	global         bool
	lose           bool
}

// Server is the fake.
type Server struct {
	cfg Config
	srv *httptest.Server

	mu        sync.Mutex
	seq       uint64 // snowflake counter
	users     map[string]User
	channels  map[string]*chanState
	guilds    map[string]*Guild
	nonces    map[string]string // channel/nonce → message id
	posts     []Message
	edits     []Edit
	reactions []Reaction
	threads   []string
	callbacks []Callback
	followups []Followup
	clickAt   map[string]time.Time // interaction id → dispatch time
	answered  map[string]bool
	calls     []Call
	rules     []*rule
	gw        gateway
	changed   chan struct{}
}

type chanState struct {
	Channel
	guild string
	msgs  []*Message
}

// New starts the fake.
func New(cfg Config) *Server {
	if cfg.Bot.ID == "" {
		cfg.Bot = User{ID: "100000000000000001", Username: "marlowe", Bot: true}
	}
	cfg.Bot.Bot = true
	if cfg.ApplicationID == "" {
		cfg.ApplicationID = "100000000000000002"
	}
	if cfg.HeartbeatInterval <= 0 {
		cfg.HeartbeatInterval = time.Second
	}
	s := &Server{
		cfg:      cfg,
		users:    map[string]User{cfg.Bot.ID: cfg.Bot},
		channels: map[string]*chanState{},
		guilds:   map[string]*Guild{},
		nonces:   map[string]string{},
		clickAt:  map[string]time.Time{},
		answered: map[string]bool{},
		changed:  make(chan struct{}),
	}
	for i := range cfg.Guilds {
		g := cfg.Guilds[i]
		hasEveryone := false
		for _, r := range g.Roles {
			hasEveryone = hasEveryone || r.ID == g.ID
		}
		if !hasEveryone {
			g.Roles = append(g.Roles, Role{ID: g.ID, Permissions: PermViewChannel})
		}
		s.guilds[g.ID] = &g
		for _, c := range g.Channels {
			s.channels[c.ID] = &chanState{Channel: c, guild: g.ID}
		}
	}
	s.gw.init()
	mux := http.NewServeMux()
	mux.HandleFunc("/api/v10/", s.serveREST)
	// discordgo adds a trailing slash to the gateway/bot URL, not to the
	// resume URL; Discord serves both shapes.
	for _, p := range []string{"/gateway", "/gateway/", "/resume", "/resume/"} {
		mux.HandleFunc(p, s.serveGateway)
	}
	s.srv = httptest.NewServer(mux)
	return s
}

// APIURL is the REST base for MARLOWE_DISCORD_API_URL.
func (s *Server) APIURL() string { return s.srv.URL + "/api/v10/" }

// Bot is the bot's user.
func (s *Server) Bot() User { return s.cfg.Bot }

func (s *Server) wsURL(path string) string {
	return "ws" + strings.TrimPrefix(s.srv.URL, "http") + path
}

// Close stops the server and drops every connection.
func (s *Server) Close() {
	s.mu.Lock()
	var conns []*gwConn
	for c := range s.gw.conns {
		conns = append(conns, c)
	}
	s.gw.cur = nil
	s.mu.Unlock()
	for _, c := range conns {
		c.shut()
	}
	s.srv.CloseClientConnections()
	s.srv.Close()
}

// notify wakes waiters (called with s.mu held).
func (s *Server) notifyLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// Wait blocks until cond (evaluated under the fake's lock) holds or timeout
// passes, re-checking whenever the fake's state changes.
func (s *Server) Wait(timeout time.Duration, cond func() bool) bool {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		ok := cond()
		ch := s.changed
		s.mu.Unlock()
		if ok {
			return true
		}
		select {
		case <-ch:
		case <-deadline.C:
			return false
		}
	}
}

// nextIDLocked mints an increasing snowflake.
func (s *Server) nextIDLocked() string {
	s.seq++
	ms := uint64(time.Now().UnixMilli() - 1420070400000)
	return strconv.FormatUint(ms<<22|(s.seq&0x3fffff), 10)
}

// RateLimit answers the next n requests whose method matches and whose path
// (after /api/v10/) starts with prefix with 429 and retry_after; global
// marks them X-RateLimit-Global.
func (s *Server) RateLimit(method, prefix string, n int, retryAfter time.Duration, global bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rules = append(s.rules, &rule{method: method, prefix: prefix, n: n, status: http.StatusTooManyRequests, retryAfter: retryAfter, global: global})
}

// LoseResponses performs the next n matching requests but cuts the
// connection instead of answering, so the client cannot tell whether they
// happened.
func (s *Server) LoseResponses(method, prefix string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rules = append(s.rules, &rule{method: method, prefix: prefix, n: n, lose: true})
}

// Calls returns the REST requests answered so far.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Call(nil), s.calls...)
}

// Posts returns the bot's created messages, in order.
func (s *Server) Posts() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Message(nil), s.posts...)
}

// PostsLocked is Posts for use inside a Wait condition.
func (s *Server) PostsLocked() []Message { return s.posts }

// Edits returns the accepted message edits, in order.
func (s *Server) Edits() []Edit {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Edit(nil), s.edits...)
}

// EditsLocked is Edits for use inside a Wait condition.
func (s *Server) EditsLocked() []Edit { return s.edits }

// Reactions returns the reactions added.
func (s *Server) Reactions() []Reaction {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Reaction(nil), s.reactions...)
}

// Threads returns the ids of threads started on messages.
func (s *Server) Threads() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.threads...)
}

// Callbacks returns the interaction responses.
func (s *Server) Callbacks() []Callback {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Callback(nil), s.callbacks...)
}

// CallbacksLocked is Callbacks for use inside a Wait condition.
func (s *Server) CallbacksLocked() []Callback { return s.callbacks }

// Followups returns the interaction follow-up messages.
func (s *Server) Followups() []Followup {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Followup(nil), s.followups...)
}

// FollowupsLocked is Followups for use inside a Wait condition.
func (s *Server) FollowupsLocked() []Followup { return s.followups }

// ChannelOf returns the channel a message id is stored in ("" if unknown).
func (s *Server) ChannelOf(id string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	for cid, c := range s.channels {
		for _, m := range c.msgs {
			if m.ID == id {
				return cid
			}
		}
	}
	return ""
}

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
	status, out := s.route(r.Method, path, r.URL.Query(), body)
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
			s.channels[id] = &chanState{Channel: Channel{ID: id, Type: TypeDM}}
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
	case method == "GET" && len(p) == 2 && p[1] == "messages":
		limit, _ := strconv.Atoi(q.Get("limit"))
		if limit <= 0 || limit > 100 {
			limit = 50
		}
		var out []any
		for i := len(c.msgs) - 1; i >= 0 && len(out) < limit; i-- {
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
		s.gw.dispatchLocked(s, "THREAD_CREATE", js)
		return 201, js
	case method == "PUT" && len(p) == 6 && p[1] == "messages" && p[3] == "reactions" && p[5] == "@me":
		if c.find(p[2]) == nil {
			return notFound(10008, "Message")
		}
		s.reactions = append(s.reactions, Reaction{ChannelID: c.ID, MessageID: p[2], Emoji: p[4]})
		return http.StatusNoContent, nil
	}
	return notFound(0, "route")
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
		s.gw.dispatchLocked(s, "MESSAGE_CREATE", js)
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
	js := map[string]any{"id": c.ID, "type": c.Type, "name": c.Name}
	if c.guild != "" {
		js["guild_id"] = c.guild
		ow := []any{}
		if c.Private {
			ow = append(ow, map[string]any{"id": c.guild, "type": 0, "allow": "0", "deny": strconv.FormatInt(PermViewChannel, 10)})
		}
		js["permission_overwrites"] = ow
	}
	if c.Parent != "" {
		js["parent_id"] = c.Parent
	}
	return js
}

func (s *Server) guildJSONLocked(g *Guild) map[string]any {
	roles := []any{}
	for _, r := range g.Roles {
		name := "role" + r.ID
		if r.ID == g.ID {
			name = "@everyone"
		}
		roles = append(roles, map[string]any{"id": r.ID, "name": name, "permissions": strconv.FormatInt(r.Permissions, 10)})
	}
	return map[string]any{"id": g.ID, "name": "guild" + g.ID, "owner_id": g.OwnerID, "roles": roles}
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
	if len(m.Components) > 0 {
		js["components"] = m.Components
	}
	if m.Nonce != "" {
		js["nonce"] = m.Nonce
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
	s.callbacks = append(s.callbacks, Callback{InteractionID: id, Type: req.Type, Content: req.Data.Content, Flags: req.Data.Flags, At: now, Latency: now.Sub(at)})
	return http.StatusNoContent, nil
}
