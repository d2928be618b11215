// Package discordfake is a local, in-process stand-in for the parts of
// Discord that Marlowe uses, so the real discordgo session can be tested
// against it: REST (gateway/bot, users/@me, channels, messages with
// nonce/enforce_nonce, threads from messages, reactions, typing, DMs, guilds and
// members, interaction callbacks, follow-ups and original responses, global
// application commands) and a gateway WebSocket speaking
// HELLO / IDENTIFY / READY / HEARTBEAT / RESUME / RECONNECT /
// INVALID_SESSION / DISPATCH, replaying after the resumed sequence at a
// separate resume_gateway_url; optionally several sessions at once
// (Config.MultiSession). Payloads follow Discord's documented shapes.
// It listens on loopback only.
package discordfake

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
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
	PermManageThreads = int64(1) << 34
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
	// Overwrites are the channel's other permission overwrites (roles
	// and members), after Private's.
	Overwrites []Overwrite
	// Recipients are a DM's people (besides the bot).
	Recipients []string
	// Members are a thread's members (GET /channels/{id}/thread-members/{user}).
	Members []string
}

// Overwrite is a channel permission overwrite for a role or a member.
type Overwrite struct {
	ID          string
	Member      bool // a member's overwrite; a role's otherwise
	Allow, Deny int64
}

// Role is a guild role.
type Role struct {
	ID          string
	Permissions int64
	// BotID makes it the managed role of that bot (tags.bot_id), as
	// Discord creates one for each bot that joins.
	BotID string
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
	// NoMessageContent makes applications/@me report the Message Content
	// intent switched off in the developer portal.
	NoMessageContent bool
	// MultiSession lets several gateway sessions of the bot live at once
	// (replicas each holding one for the same shard): each IDENTIFY opens
	// its own session, RESUMEs against its own, and every DISPATCH goes to
	// every session. Off, a new IDENTIFY ends the previous session.
	MultiSession bool
	// Ready, when set, is the READY dispatch sent after IDENTIFY instead of
	// the fake's own: a whole frame ({"op":0,"t":"READY","d":{...}}) or just
	// its d, e.g. a captured one. Its session_id is replaced by the fake's,
	// and nothing else is changed: a READY without resume_gateway_url stays
	// without it.
	Ready json.RawMessage
	// RouteBuckets keeps to Discord's per-route buckets (buckets.go): a
	// request over its route's bucket is answered 429. Off, the bucket
	// headers are still sent, with limits no test reaches.
	RouteBuckets bool
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
	Flags      int             `json:"flags,omitempty"`
	At         time.Time       `json:"-"`

	// What Say resolved from the content, for REST reads of it.
	mentions    []any
	roles       []string
	everyone    bool
	attachments []map[string]any
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
// response: a new message, or (Original) an edit of the original response.
type Followup struct {
	InteractionID string
	Content       string
	Flags         int
	At            time.Time
	Original      bool
}

// Call is one REST request as answered.
type Call struct {
	Method, Path string
	Status       int
	At           time.Time
}

// Typing is one POST channels/{id}/typing ("is typing…" for about 10 s).
type Typing struct {
	ChannelID string
	At        time.Time
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
	// spend: the request is answered as usual, with its bucket spent
	// (Remaining 0, Reset-After spend).
	spend time.Duration
	// stall: the request waits for release before it is answered;
	// entered is closed when it starts waiting.
	stall, entered chan struct{}
}

// Server is the fake.
type Server struct {
	cfg Config
	srv *httptest.Server

	files  attachments // files sent with messages (files.go)
	hosted hostedFiles // files people shared (hosted.go)

	mu        sync.Mutex
	seq       uint64 // snowflake counter
	users     map[string]User
	channels  map[string]*chanState
	guilds    map[string]*Guild
	nonces    map[string]string // channel/nonce → message id
	posts     []Message
	edits     []Edit
	reactions []Reaction
	typings   []Typing
	threads   []string
	callbacks []Callback
	pings     []Ping // mass mentions notified (pings.go)
	followups []Followup
	clickAt   map[string]time.Time // interaction id → dispatch time
	answered  map[string]bool
	originals map[string]*Message // interaction id → its original response
	slashChan map[string]string   // interaction id → channel
	commands  []Command
	// commandPuts counts bulk overwrites of the global commands.
	commandPuts int
	calls       []Call
	rules       []*rule
	buckets     map[string]*bucketState // route and major parameter → use (buckets.go)
	gw          gateway
	changed     chan struct{}
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
		cfg:       cfg,
		users:     map[string]User{cfg.Bot.ID: cfg.Bot},
		channels:  map[string]*chanState{},
		guilds:    map[string]*Guild{},
		nonces:    map[string]string{},
		clickAt:   map[string]time.Time{},
		answered:  map[string]bool{},
		originals: map[string]*Message{},
		slashChan: map[string]string{},
		changed:   make(chan struct{}),
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
	mux.HandleFunc("/attachments/", s.serveHosted)
	// discordgo adds a trailing slash to the gateway/bot URL, not to the
	// resume URL; Discord serves both shapes.
	for _, p := range []string{"/gateway", "/gateway/", "/resume", "/resume/"} {
		mux.HandleFunc(p, s.serveGateway)
	}
	// Assigned before it serves: a client left over from an earlier fake on
	// the same port may call in at once, and handlers read s.srv.URL.
	s.srv = httptest.NewUnstartedServer(mux)
	s.srv.Start()
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
	s.gw.sessions = nil
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

// SpendBucket answers the next n requests whose method matches and whose
// path (after /api/v10/) starts with prefix as usual, but with their bucket
// spent: X-RateLimit-Remaining 0 and X-RateLimit-Reset-After resetAfter, as
// Discord answers the last call a bucket allows before a reset still ahead.
func (s *Server) SpendBucket(method, prefix string, n int, resetAfter time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rules = append(s.rules, &rule{method: method, prefix: prefix, n: n, spend: resetAfter})
}

// Stall makes the next request whose method matches and whose path
// (after /api/v10/) starts with prefix wait, before it is answered, until
// release is called; entered is closed when it starts waiting. A test
// uses it to act while a client's read is in flight.
func (s *Server) Stall(method, prefix string) (entered <-chan struct{}, release func()) {
	ru := &rule{method: method, prefix: prefix, n: 1, stall: make(chan struct{}), entered: make(chan struct{})}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rules = append(s.rules, ru)
	var once sync.Once
	return ru.entered, func() { once.Do(func() { close(ru.stall) }) }
}

// Calls returns the REST requests answered so far.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Call(nil), s.calls...)
}

// CallsLocked is Calls for use inside a Wait condition.
func (s *Server) CallsLocked() []Call { return s.calls }

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

// Typings returns the typing indicators triggered, in order.
func (s *Server) Typings() []Typing {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Typing(nil), s.typings...)
}

// TypingsLocked is Typings for a Wait condition (the lock is held).
func (s *Server) TypingsLocked() []Typing { return s.typings }

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
