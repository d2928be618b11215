// Package slackfake is a local, in-process fake of the parts of Slack that
// Marlowe uses: the Web API methods (auth.test, chat.postMessage,
// chat.postEphemeral, chat.update, reactions.add,
// conversations.open/.info/.replies/.history, users.list, users.info,
// apps.connections.open) and a Socket Mode WebSocket endpoint
// that pushes events_api and interactive envelopes, records acks, redelivers
// unacknowledged envelopes with retry_attempt, and can drop connections.
//
// The real slack-go client and socketmode client talk to it through
// slack.OptionAPIURL(server.APIURL()). It also builds and signs Events API
// request bodies for http-mode tests. It listens on loopback only.
package slackfake

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// Config describes the fake workspace. Zero values get defaults.
type Config struct {
	TeamID    string // default T0FAKE0001
	AppID     string // default A0FAKE0001
	BotUserID string // default U0FAKEB0T1
	BotID     string // default B0FAKEB0T1
	BotHandle string // default "marlowe-fake"
	BotName   string // display name; default BotHandle

	// BotToken and AppToken, when set, are the only tokens accepted;
	// otherwise any xoxb- / xapp- token is.
	BotToken string
	AppToken string

	// PingInterval is how often the Socket Mode endpoint pings (default 100ms).
	PingInterval time.Duration
	// RedeliverAfter is how long an envelope may stay unacknowledged before
	// it is sent again with retry_attempt+1 (default 1s; Slack's real
	// schedule is about immediately, 1 min, 5 min).
	RedeliverAfter time.Duration
	// MaxRetries bounds redeliveries per event (default 3, like Slack).
	MaxRetries int

	// Channels maps channel ids to their kind: "channel" (public), "group"
	// (private), "mpim" or "im". Unknown C… ids count as public channels.
	Channels map[string]string
	// ChannelTeams maps channel ids to the workspace hosting them
	// (conversations.info's context_team_id; default TeamID): a Slack
	// Connect channel shared from another organisation.
	ChannelTeams map[string]string
	// Members maps channel ids to their members (conversations.members;
	// members.go). A DM's member is its person: D… ids default to the
	// U… id with the same suffix, as conversations.open makes them.
	Members map[string][]string
	// Users are the workspace members users.list returns (the bot user is
	// added automatically).
	Users []User

	// EchoPosts sends the bot's own posts back as message events (with
	// bot_id), as Slack does.
	EchoPosts bool

	// Scopes, when not nil, are listed in the X-OAuth-Scopes header of
	// every answer to a bot-token call, as Slack lists the token's scopes.
	Scopes []string
}

// User is a workspace member.
type User struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	RealName    string `json:"real_name,omitempty"`
	DisplayName string `json:"-"`
	Deleted     bool   `json:"deleted,omitempty"`
	IsBot       bool   `json:"is_bot,omitempty"`
	// Workspace roles, as users.info reports them.
	IsAdmin        bool `json:"is_admin,omitempty"`
	IsOwner        bool `json:"is_owner,omitempty"`
	IsPrimaryOwner bool `json:"is_primary_owner,omitempty"`
	IsRestricted   bool `json:"is_restricted,omitempty"` // a guest
}

// Message is a message stored in a channel.
type Message struct {
	Channel  string          `json:"channel"`
	TS       string          `json:"ts"`
	ThreadTS string          `json:"thread_ts,omitempty"`
	User     string          `json:"user,omitempty"`
	BotID    string          `json:"bot_id,omitempty"`
	Subtype  string          `json:"subtype,omitempty"`
	Text     string          `json:"text"`
	Blocks   json.RawMessage `json:"blocks,omitempty"`
	Metadata json.RawMessage `json:"metadata,omitempty"`
	// StreamingState is "in_progress" while a chat.startStream message
	// streams and "completed" once stopped (stream.go).
	StreamingState string `json:"streaming_state,omitempty"`
}

// Post is one accepted chat.postMessage.
type Post struct {
	Message
	At time.Time
}

// Update is one accepted chat.update.
type Update struct {
	Channel string
	TS      string
	Text    string
	Blocks  json.RawMessage
	At      time.Time
}

// Reaction is one accepted reactions.add.
type Reaction struct {
	Channel, TS, Name string
}

// Call is one Web API request as the fake answered it.
type Call struct {
	Method string
	Status int // HTTP status; 429 for rate limited
	At     time.Time
	// Texts is every string the request carried: each form value, and
	// each string inside a form value or body that is JSON (blocks,
	// chunks, files), decoded, so a test can read what Slack would show.
	Texts []string
}

// Ack is one Socket Mode acknowledgement.
type Ack struct {
	EnvelopeID string
	EventID    string
	Attempt    int
	At         time.Time
	Latency    time.Duration // since that envelope was sent
}

// Server is a running fake. Close it when done.
type Server struct {
	cfg Config
	srv *httptest.Server
	up  websocket.Upgrader

	files files // external uploads (files.go)

	mu         sync.Mutex
	hosted     hosted // files people shared, under mu (hosted.go)
	tsSeq      int64
	tsBase     int64
	idSeq      int
	messages   map[string][]*Message // channel → messages in ts order
	posts      []Post
	updates    []Update
	reactions  []Reaction
	ephemerals []Ephemeral
	calls      []Call
	limits     map[string]*limit
	lose       map[string]int
	fails      map[string]*failure
	authTests  int
	opens      int
	conns      map[*wsConn]bool
	connSeq    int
	rr         int
	pending    []*envelope // waiting for a connection
	envelopes  map[string]*envelope
	unacked    map[*envelope]struct{}
	events     map[string]*delivery // event id → delivery state
	acks       []Ack
	unknownAck []string
	closed     bool
	done       chan struct{}
	wg         sync.WaitGroup
	home       homeViews // views.publish (home.go)
	agent      agentBook // streams and assistant threads (stream.go), under mu
}

type limit struct {
	n          int
	retryAfter int
}

type failure struct {
	n    int
	code string
}

type delivery struct {
	eventID  string
	typ      string
	payload  json.RawMessage // the envelope payload
	attempts int
	acked    bool
}

type envelope struct {
	id      string
	d       *delivery
	attempt int
	sentAt  time.Time
	sent    bool
	acked   bool
}

type wsConn struct {
	c     *websocket.Conn
	wmu   sync.Mutex
	id    int
	close sync.Once
}

// New starts a fake Slack on a loopback port.
func New(cfg Config) *Server {
	if cfg.TeamID == "" {
		cfg.TeamID = "T0FAKE0001"
	}
	if cfg.AppID == "" {
		cfg.AppID = "A0FAKE0001"
	}
	if cfg.BotUserID == "" {
		cfg.BotUserID = "U0FAKEB0T1"
	}
	if cfg.BotID == "" {
		cfg.BotID = "B0FAKEB0T1"
	}
	if cfg.BotHandle == "" {
		cfg.BotHandle = "marlowe-fake"
	}
	if cfg.BotName == "" {
		cfg.BotName = cfg.BotHandle
	}
	if cfg.PingInterval <= 0 {
		cfg.PingInterval = 100 * time.Millisecond
	}
	if cfg.RedeliverAfter <= 0 {
		cfg.RedeliverAfter = time.Second
	}
	if cfg.MaxRetries <= 0 {
		cfg.MaxRetries = 3
	}
	s := &Server{
		cfg:       cfg,
		tsBase:    time.Now().Unix(),
		messages:  map[string][]*Message{},
		limits:    map[string]*limit{},
		lose:      map[string]int{},
		fails:     map[string]*failure{},
		conns:     map[*wsConn]bool{},
		envelopes: map[string]*envelope{},
		unacked:   map[*envelope]struct{}{},
		events:    map[string]*delivery{},
		done:      make(chan struct{}),
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/api/", s.serveAPI)
	mux.HandleFunc("/socket", s.serveSocket)
	mux.HandleFunc("/upload/", s.serveUpload)
	mux.HandleFunc("/files-pri/", s.serveHosted)
	// socketmode dials with Origin: https://api.slack.com, as Slack expects.
	s.up = websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}
	// Assigned before it serves: a client left over from an earlier fake on
	// the same port may call in at once, and handlers read s.srv.URL.
	s.srv = httptest.NewUnstartedServer(mux)
	s.srv.Start()
	s.wg.Go(s.redeliverLoop)
	return s
}

// APIURL is the Web API base URL, with its trailing slash, for
// slack.OptionAPIURL / MARLOWE_SLACK_API_URL.
func (s *Server) APIURL() string { return s.srv.URL + "/api/" }

// Config returns the fake's effective configuration (with defaults).
func (s *Server) Config() Config { return s.cfg }

// Close drops every connection and stops the server.
func (s *Server) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	close(s.done)
	conns := make([]*wsConn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.shut()
	}
	s.srv.CloseClientConnections()
	s.srv.Close()
	s.wg.Wait()
}

// ---------------------------------------------------------------------------
// Web API

type apiReq struct {
	method string
	form   url.Values
	token  string
	json   []byte // the body of a JSON-bodied method (views.publish)
}

func (s *Server) serveAPI(w http.ResponseWriter, r *http.Request) {
	method := strings.TrimPrefix(r.URL.Path, "/api/")
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form", http.StatusBadRequest)
		return
	}
	req := apiReq{method: method, form: r.Form, token: r.Form.Get("token")}
	if strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		b, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, "bad body", http.StatusBadRequest)
			return
		}
		req.json = b
	}
	if h := r.Header.Get("Authorization"); strings.HasPrefix(h, "Bearer ") {
		req.token = strings.TrimPrefix(h, "Bearer ")
	}
	now := time.Now()
	texts := requestTexts(r.Form, req.json)

	s.mu.Lock()
	if l := s.limits[method]; l != nil && l.n > 0 {
		l.n--
		s.calls = append(s.calls, Call{Method: method, Status: http.StatusTooManyRequests, At: now, Texts: texts})
		ra := l.retryAfter
		s.mu.Unlock()
		w.Header().Set("Retry-After", strconv.Itoa(ra))
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = w.Write([]byte(`{"ok":false,"error":"ratelimited"}`))
		return
	}
	if f := s.fails[method]; f != nil && f.n > 0 {
		f.n--
		s.calls = append(s.calls, Call{Method: method, Status: http.StatusOK, At: now, Texts: texts})
		code := f.code
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(fail(code))
		return
	}
	s.calls = append(s.calls, Call{Method: method, Status: http.StatusOK, At: now, Texts: texts})
	lose := false
	if s.lose[method] > 0 {
		s.lose[method]--
		lose = true
	}
	s.mu.Unlock()

	var resp any
	if method == "apps.connections.open" {
		if !s.appTokenOK(req.token) {
			resp = fail("invalid_auth")
		} else {
			resp = s.connectionsOpen()
		}
	} else if !s.botTokenOK(req.token) {
		resp = fail("invalid_auth")
	} else {
		switch method {
		case "auth.test":
			resp = s.authTest()
		case "chat.postMessage":
			resp = s.postMessage(req)
		case "chat.update":
			resp = s.chatUpdate(req)
		case "reactions.add":
			resp = s.reactionsAdd(req)
		case "conversations.open":
			resp = s.conversationsOpen(req)
		case "conversations.info":
			resp = s.conversationsInfo(req)
		case "conversations.replies":
			resp = s.conversationsReplies(req)
		case "conversations.history":
			resp = s.conversationsHistory(req)
		case "users.list":
			resp = s.usersList(req)
		case "users.info":
			resp = s.usersInfo(req)
		case "conversations.members":
			resp = s.conversationsMembers(req)
		case "chat.postEphemeral":
			resp = s.postEphemeral(req)
		case "views.publish":
			resp = s.viewsPublish(req)
		case "chat.getPermalink":
			resp = s.getPermalink(req)
		case "files.getUploadURLExternal":
			resp = s.getUploadURL(req)
		case "files.completeUploadExternal":
			resp = s.completeUpload(req)
		default:
			var ok bool
			if resp, ok = s.agentAPI(req); !ok {
				resp = fail("unknown_method")
			}
		}
	}
	if lose {
		// The call took effect; the response never arrives.
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				_ = conn.Close()
				return
			}
		}
	}
	if s.cfg.Scopes != nil && method != "apps.connections.open" {
		w.Header().Set("X-OAuth-Scopes", strings.Join(s.cfg.Scopes, ","))
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(resp)
}

func fail(code string) map[string]any { return map[string]any{"ok": false, "error": code} }

func (s *Server) botTokenOK(tok string) bool {
	if s.cfg.BotToken != "" {
		return tok == s.cfg.BotToken
	}
	return strings.HasPrefix(tok, "xoxb-")
}

func (s *Server) appTokenOK(tok string) bool {
	if s.cfg.AppToken != "" {
		return tok == s.cfg.AppToken
	}
	return strings.HasPrefix(tok, "xapp-")
}

func (s *Server) authTest() any {
	s.mu.Lock()
	s.authTests++
	s.mu.Unlock()
	return map[string]any{
		"ok": true, "url": "https://fake.slack.test/", "team": "Fake Team", "user": s.cfg.BotHandle,
		"team_id": s.cfg.TeamID, "user_id": s.cfg.BotUserID, "bot_id": s.cfg.BotID,
	}
}

func (s *Server) connectionsOpen() any {
	s.mu.Lock()
	s.opens++
	n := s.opens
	s.mu.Unlock()
	u := "ws" + strings.TrimPrefix(s.srv.URL, "http") + "/socket?ticket=" + strconv.Itoa(n)
	return map[string]any{"ok": true, "url": u}
}

// nextTSLocked returns a fresh, increasing message ts.
func (s *Server) nextTSLocked() string {
	s.tsSeq++
	return fmt.Sprintf("%d.%06d", s.tsBase+s.tsSeq/1000000, s.tsSeq%1000000)
}

func (s *Server) nextIDLocked(prefix string) string {
	s.idSeq++
	return fmt.Sprintf("%s%08d", prefix, s.idSeq)
}

func (s *Server) postMessage(r apiReq) any {
	ch := r.form.Get("channel")
	if ch == "" {
		return fail("channel_not_found")
	}
	text := r.form.Get("text")
	blocks := r.form.Get("blocks")
	if text == "" && blocks == "" {
		return fail("no_text")
	}
	if len([]rune(text)) > 40000 {
		return fail("msg_too_long")
	}
	s.mu.Lock()
	m := &Message{
		Channel: ch, TS: s.nextTSLocked(), ThreadTS: r.form.Get("thread_ts"),
		User: s.cfg.BotUserID, BotID: s.cfg.BotID, Text: text,
	}
	if blocks != "" {
		m.Blocks = json.RawMessage(blocks)
	}
	if md := r.form.Get("metadata"); md != "" {
		m.Metadata = json.RawMessage(md)
	}
	s.messages[ch] = append(s.messages[ch], m)
	s.posts = append(s.posts, Post{Message: *m, At: time.Now()})
	echo := s.cfg.EchoPosts
	s.mu.Unlock()
	if echo {
		ev := map[string]any{
			"type": "message", "channel": ch, "user": m.User, "bot_id": m.BotID, "text": m.Text,
			"ts": m.TS, "event_ts": m.TS, "channel_type": s.ChannelType(ch),
		}
		if m.ThreadTS != "" {
			ev["thread_ts"] = m.ThreadTS
		}
		s.PushEvent(ev)
	}
	return map[string]any{"ok": true, "channel": ch, "ts": m.TS, "message": m}
}

func (s *Server) findLocked(ch, ts string) *Message {
	for _, m := range s.messages[ch] {
		if m.TS == ts {
			return m
		}
	}
	return nil
}

func (s *Server) chatUpdate(r apiReq) any {
	ch, ts := r.form.Get("channel"), r.form.Get("ts")
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.findLocked(ch, ts)
	if m == nil {
		return fail("message_not_found")
	}
	if m.BotID != s.cfg.BotID {
		return fail("cant_update_message")
	}
	if t := r.form.Get("text"); t != "" || r.form.Has("text") {
		m.Text = t
	}
	if r.form.Has("blocks") {
		m.Blocks = json.RawMessage(r.form.Get("blocks"))
	}
	s.updates = append(s.updates, Update{Channel: ch, TS: ts, Text: m.Text, Blocks: m.Blocks, At: time.Now()})
	return map[string]any{"ok": true, "channel": ch, "ts": ts, "text": m.Text}
}

func (s *Server) reactionsAdd(r apiReq) any {
	ch, ts, name := r.form.Get("channel"), r.form.Get("timestamp"), r.form.Get("name")
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.findLocked(ch, ts) == nil {
		return fail("message_not_found")
	}
	for _, x := range s.reactions {
		if x == (Reaction{Channel: ch, TS: ts, Name: name}) {
			return fail("already_reacted")
		}
	}
	s.reactions = append(s.reactions, Reaction{Channel: ch, TS: ts, Name: name})
	return map[string]any{"ok": true}
}

func (s *Server) conversationsOpen(r apiReq) any {
	users := r.form.Get("users")
	if users == "" || strings.Contains(users, ",") {
		return fail("invalid_users")
	}
	id := "D" + strings.TrimPrefix(users, "U")
	s.mu.Lock()
	if s.cfg.Channels == nil {
		s.cfg.Channels = map[string]string{}
	}
	s.cfg.Channels[id] = "im"
	s.mu.Unlock()
	return map[string]any{"ok": true, "channel": map[string]any{"id": id, "is_im": true}}
}

// ChannelType reports a channel's kind as the fake sees it.
func (s *Server) ChannelType(ch string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.channelTypeLocked(ch)
}

func (s *Server) channelTypeLocked(ch string) string {
	if t, ok := s.cfg.Channels[ch]; ok {
		return t
	}
	switch {
	case strings.HasPrefix(ch, "D"):
		return "im"
	case strings.HasPrefix(ch, "G"):
		return "group"
	}
	return "channel"
}

func (s *Server) conversationsInfo(r apiReq) any {
	ch := r.form.Get("channel")
	s.mu.Lock()
	t := s.channelTypeLocked(ch)
	team, shared := s.cfg.ChannelTeams[ch]
	if !shared {
		team = s.cfg.TeamID
	}
	s.mu.Unlock()
	return map[string]any{"ok": true, "channel": map[string]any{
		"id": ch, "is_channel": t == "channel", "is_group": t == "group", "is_im": t == "im",
		"is_mpim": t == "mpim", "is_private": t == "group" || t == "mpim",
		"context_team_id": team, "is_ext_shared": shared, "user": s.dmUser(ch, t),
	}}
}

func (s *Server) render(m *Message, withMeta bool) map[string]any {
	out := map[string]any{"type": "message", "ts": m.TS, "text": m.Text}
	if m.User != "" {
		out["user"] = m.User
	}
	if m.BotID != "" {
		out["bot_id"] = m.BotID
	}
	if m.ThreadTS != "" {
		out["thread_ts"] = m.ThreadTS
	}
	if m.Subtype != "" {
		out["subtype"] = m.Subtype
	}
	if len(m.Blocks) > 0 {
		out["blocks"] = m.Blocks
	}
	if withMeta && len(m.Metadata) > 0 {
		out["metadata"] = m.Metadata
	}
	return out
}

func page(form url.Values, n int) (start, end int, next string) {
	lim, _ := strconv.Atoi(form.Get("limit"))
	if lim <= 0 || lim > 1000 {
		lim = 100
	}
	start, _ = strconv.Atoi(form.Get("cursor"))
	start = min(max(start, 0), n)
	end = min(start+lim, n)
	if end < n {
		next = strconv.Itoa(end)
	}
	return start, end, next
}

// messagesPageLocked answers a conversations.* read with the page of msgs
// the request's cursor and limit select.
func (s *Server) messagesPageLocked(form url.Values, msgs []*Message) map[string]any {
	withMeta := form.Get("include_all_metadata") == "1" || form.Get("include_all_metadata") == "true"
	start, end, next := page(form, len(msgs))
	out := []map[string]any{}
	for _, m := range msgs[start:end] {
		out = append(out, s.render(m, withMeta))
	}
	return map[string]any{"ok": true, "messages": out, "has_more": next != "",
		"response_metadata": map[string]any{"next_cursor": next}}
}

func (s *Server) conversationsReplies(r apiReq) any {
	ch, root := r.form.Get("channel"), r.form.Get("ts")
	oldest := r.form.Get("oldest")
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.findLocked(ch, root) == nil {
		return fail("thread_not_found")
	}
	var thread []*Message
	for _, m := range s.messages[ch] {
		if m.TS == root || m.ThreadTS == root {
			if oldest != "" && tsLess(m.TS, oldest) && m.TS != root {
				continue
			}
			thread = append(thread, m)
		}
	}
	return s.messagesPageLocked(r.form, thread)
}

func (s *Server) conversationsHistory(r apiReq) any {
	ch := r.form.Get("channel")
	oldest := r.form.Get("oldest")
	s.mu.Lock()
	defer s.mu.Unlock()
	var top []*Message
	all := s.messages[ch]
	for i := len(all) - 1; i >= 0; i-- { // newest first
		m := all[i]
		if m.ThreadTS != "" && m.ThreadTS != m.TS {
			continue
		}
		if oldest != "" && tsLess(m.TS, oldest) {
			continue
		}
		top = append(top, m)
	}
	return s.messagesPageLocked(r.form, top)
}

func (s *Server) usersList(r apiReq) any {
	s.mu.Lock()
	users := append([]User{{ID: s.cfg.BotUserID, Name: s.cfg.BotHandle, RealName: s.cfg.BotName, DisplayName: s.cfg.BotName, IsBot: true}}, s.cfg.Users...)
	s.mu.Unlock()
	start, end, next := page(r.form, len(users))
	members := []map[string]any{}
	for _, u := range users[start:end] {
		members = append(members, map[string]any{
			"id": u.ID, "name": u.Name, "real_name": u.RealName, "deleted": u.Deleted, "is_bot": u.IsBot,
			"profile": map[string]any{"display_name": u.DisplayName, "real_name": u.RealName},
		})
	}
	return map[string]any{"ok": true, "members": members, "response_metadata": map[string]any{"next_cursor": next}}
}

// tsLess compares two Slack timestamps numerically.
func tsLess(a, b string) bool {
	as, af, _ := strings.Cut(a, ".")
	bs, bf, _ := strings.Cut(b, ".")
	ai, _ := strconv.ParseInt(as, 10, 64)
	bi, _ := strconv.ParseInt(bs, 10, 64)
	if ai != bi {
		return ai < bi
	}
	af = (af + "000000")[:6]
	bf = (bf + "000000")[:6]
	return af < bf
}

// ---------------------------------------------------------------------------
// Scripting

// RateLimit makes the next n calls to method answer 429 with Retry-After
// (whole seconds, at least 1, as Slack sends it).
func (s *Server) RateLimit(method string, n int, retryAfter time.Duration) {
	secs := int((retryAfter + time.Second - 1) / time.Second)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.limits[method] = &limit{n: n, retryAfter: max(secs, 1)}
}

// LoseResponses makes the next n calls to method take effect but close the
// connection instead of answering (a response lost after the send).
func (s *Server) LoseResponses(method string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lose[method] = n
}

// FailCalls makes the next n calls to method answer {"ok":false,"error":code}
// without taking effect (e.g. chat.update with "cant_update_message").
func (s *Server) FailCalls(method string, n int, code string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fails[method] = &failure{n: n, code: code}
}

// AddMessage stores a person's message in a channel (for history) without
// sending any event; it returns its ts.
func (s *Server) AddMessage(channel, threadTS, user, text string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := &Message{Channel: channel, TS: s.nextTSLocked(), ThreadTS: threadTS, User: user, Text: text}
	s.messages[channel] = append(s.messages[channel], m)
	return m.TS
}

// Posts returns every accepted chat.postMessage, in order.
func (s *Server) Posts() []Post {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Post(nil), s.posts...)
}

// Updates returns every accepted chat.update, in order.
func (s *Server) Updates() []Update {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Update(nil), s.updates...)
}

// Reactions returns every accepted reactions.add, in order.
func (s *Server) Reactions() []Reaction {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Reaction(nil), s.reactions...)
}

// Calls returns every Web API call, in order.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Call(nil), s.calls...)
}

// CallCount counts calls to method (all statuses).
func (s *Server) CallCount(method string) int {
	n := 0
	for _, c := range s.Calls() {
		if c.Method == method {
			n++
		}
	}
	return n
}

// AuthTests counts auth.test calls.
func (s *Server) AuthTests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.authTests
}

// Message returns a stored message.
func (s *Server) Message(channel, ts string) (Message, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m := s.findLocked(channel, ts); m != nil {
		return *m, true
	}
	return Message{}, false
}

// ---------------------------------------------------------------------------
// Socket Mode

func (s *Server) serveSocket(w http.ResponseWriter, r *http.Request) {
	c, err := s.up.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		_ = c.Close()
		return
	}
	s.connSeq++
	wc := &wsConn{c: c, id: s.connSeq}
	s.conns[wc] = true
	n := len(s.conns)
	s.wg.Add(1) // under mu with closed == false: Close waits for it
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		s.pingLoop(wc)
	}()

	hello, _ := json.Marshal(map[string]any{
		"type": "hello", "num_connections": n,
		"debug_info":      map[string]any{"host": "fake-applink", "approximate_connection_time": 18060},
		"connection_info": map[string]any{"app_id": s.cfg.AppID},
	})
	if wc.write(hello) != nil {
		s.dropConn(wc)
		return
	}
	s.flushPending()

	for {
		_, data, err := c.ReadMessage()
		if err != nil {
			break
		}
		var ack struct {
			EnvelopeID string `json:"envelope_id"`
		}
		if json.Unmarshal(data, &ack) == nil && ack.EnvelopeID != "" {
			s.recordAck(ack.EnvelopeID)
		}
	}
	s.dropConn(wc)
}

func (c *wsConn) write(b []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_ = c.c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	return c.c.WriteMessage(websocket.TextMessage, b)
}

func (c *wsConn) shut() {
	c.close.Do(func() { _ = c.c.Close() })
}

func (s *Server) dropConn(wc *wsConn) {
	wc.shut()
	s.mu.Lock()
	delete(s.conns, wc)
	s.mu.Unlock()
}

func (s *Server) pingLoop(wc *wsConn) {
	t := time.NewTicker(s.cfg.PingInterval)
	defer t.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-t.C:
		}
		s.mu.Lock()
		live := s.conns[wc]
		s.mu.Unlock()
		if !live {
			return
		}
		if err := wc.c.WriteControl(websocket.PingMessage, []byte("ping"), time.Now().Add(time.Second)); err != nil {
			s.dropConn(wc)
			return
		}
	}
}

func (s *Server) recordAck(envID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.envelopes[envID]
	if e == nil {
		s.unknownAck = append(s.unknownAck, envID)
		return
	}
	now := time.Now()
	if !e.acked {
		e.acked = true
		e.d.acked = true
	}
	delete(s.unacked, e)
	s.acks = append(s.acks, Ack{EnvelopeID: envID, EventID: e.d.eventID, Attempt: e.attempt, At: now, Latency: now.Sub(e.sentAt)})
}

// Connections is the number of live Socket Mode connections.
func (s *Server) Connections() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// ConnectionsOpened counts apps.connections.open calls.
func (s *Server) ConnectionsOpened() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.opens
}

// DropConnections closes every Socket Mode connection abruptly (no
// disconnect message), as a network failure would.
func (s *Server) DropConnections() {
	s.mu.Lock()
	conns := make([]*wsConn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
		delete(s.conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.shut()
	}
}

// RequestReconnect sends Slack's polite "disconnect" message on every
// connection (the client reconnects).
func (s *Server) RequestReconnect() {
	msg, _ := json.Marshal(map[string]any{"type": "disconnect", "reason": "refresh_requested",
		"debug_info": map[string]any{"host": "fake-applink"}})
	s.mu.Lock()
	conns := make([]*wsConn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		_ = c.write(msg)
	}
}

// WaitConnected waits until at least one Socket Mode connection is live.
func (s *Server) WaitConnected(timeout time.Duration) bool {
	return waitFor(timeout, func() bool { return s.Connections() > 0 })
}

func waitFor(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// PushEvent wraps an inner event (a map or struct shaped like Slack's
// app_mention / message events) in an event_callback and sends it as an
// events_api envelope. It returns the event_id.
func (s *Server) PushEvent(inner any) string {
	s.mu.Lock()
	eventID := s.nextIDLocked("Ev")
	s.mu.Unlock()
	body := s.EventCallbackJSON(eventID, inner)
	s.push(eventID, "events_api", body)
	return eventID
}

// PushInteraction sends an interactive envelope (e.g. BlockActionsJSON).
// It returns the delivery id used by EventAcked.
func (s *Server) PushInteraction(payload []byte) string {
	s.mu.Lock()
	id := s.nextIDLocked("Ia")
	s.mu.Unlock()
	s.push(id, "interactive", payload)
	return id
}

// PushEnvelope sends an arbitrary envelope payload (any JSON, malformed
// shapes included) as an envelope of type typ ("events_api",
// "interactive", ...). It returns the delivery id.
func (s *Server) PushEnvelope(typ string, payload []byte) string {
	s.mu.Lock()
	id := s.nextIDLocked("Raw")
	s.mu.Unlock()
	s.push(id, typ, payload)
	return id
}

// Redeliver sends the delivery (an event id from PushEvent, Say,
// PushInteraction or PushEnvelope) again at once with the next
// retry_attempt, acknowledged or not: what Slack does when an ack came too
// late.
func (s *Server) Redeliver(id string) bool {
	s.mu.Lock()
	d := s.events[id]
	if d == nil {
		s.mu.Unlock()
		return false
	}
	e := s.newEnvelopeLocked(d)
	s.mu.Unlock()
	s.send(e)
	return true
}

func (s *Server) push(eventID, typ string, payload []byte) {
	s.mu.Lock()
	d := &delivery{eventID: eventID, typ: typ, payload: payload}
	s.events[eventID] = d
	e := s.newEnvelopeLocked(d)
	s.mu.Unlock()
	s.send(e)
}

func (s *Server) newEnvelopeLocked(d *delivery) *envelope {
	e := &envelope{id: s.nextIDLocked("env-"), d: d, attempt: d.attempts}
	d.attempts++
	s.envelopes[e.id] = e
	return e
}

// send writes e to one live connection, or parks it until one connects.
func (s *Server) send(e *envelope) {
	s.mu.Lock()
	var target *wsConn
	if len(s.conns) > 0 {
		conns := make([]*wsConn, 0, len(s.conns))
		for c := range s.conns {
			conns = append(conns, c)
		}
		sort.Slice(conns, func(i, j int) bool { return conns[i].id < conns[j].id })
		s.rr++
		target = conns[s.rr%len(conns)]
	}
	if target == nil {
		s.pending = append(s.pending, e)
		s.mu.Unlock()
		return
	}
	e.sentAt = time.Now()
	e.sent = true
	s.unacked[e] = struct{}{}
	msg := map[string]any{
		"envelope_id": e.id, "type": e.d.typ, "payload": e.d.payload,
		"accepts_response_payload": false, "retry_attempt": e.attempt,
	}
	if e.attempt > 0 {
		msg["retry_reason"] = "timeout"
	}
	s.mu.Unlock()
	b, _ := json.Marshal(msg)
	if err := target.write(b); err != nil {
		s.dropConn(target)
		// Left sent-but-unacked: the redelivery loop retries it.
	}
}

func (s *Server) flushPending() {
	s.mu.Lock()
	p := s.pending
	s.pending = nil
	s.mu.Unlock()
	for _, e := range p {
		s.send(e)
	}
}

// redeliverLoop resends unacknowledged deliveries, as Slack does.
func (s *Server) redeliverLoop() {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-t.C:
		}
		var again []*envelope
		now := time.Now()
		s.mu.Lock()
		for e := range s.unacked {
			if e.acked || e.d.acked || e.attempt != e.d.attempts-1 || e.d.attempts > s.cfg.MaxRetries {
				// Acked, superseded by a newer envelope, or out of retries.
				delete(s.unacked, e)
				continue
			}
			if now.Sub(e.sentAt) < s.cfg.RedeliverAfter {
				continue
			}
			delete(s.unacked, e)
			again = append(again, s.newEnvelopeLocked(e.d))
		}
		s.mu.Unlock()
		for _, e := range again {
			s.send(e)
		}
	}
}

// Acks returns every acknowledgement received, in order.
func (s *Server) Acks() []Ack {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Ack(nil), s.acks...)
}

// AckCount is the number of acknowledgements received.
func (s *Server) AckCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.acks)
}

// Acked reports whether the envelope was acknowledged.
func (s *Server) Acked(envelopeID string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.envelopes[envelopeID]
	return e != nil && e.acked
}

// EventAcked reports whether any envelope of the event was acknowledged.
func (s *Server) EventAcked(eventID string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.events[eventID]
	return d != nil && d.acked
}

// Attempts reports how many envelopes were sent for an event.
func (s *Server) Attempts(eventID string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if d := s.events[eventID]; d != nil {
		return d.attempts
	}
	return 0
}

// WaitEventAcked waits until the event is acknowledged.
func (s *Server) WaitEventAcked(eventID string, timeout time.Duration) bool {
	return waitFor(timeout, func() bool { return s.EventAcked(eventID) })
}

// Envelopes lists the envelope ids sent for an event, oldest first.
func (s *Server) Envelopes(eventID string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*envelope
	for _, e := range s.envelopes {
		if e.d.eventID == eventID {
			out = append(out, e)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].attempt < out[j].attempt })
	ids := make([]string, len(out))
	for i, e := range out {
		ids[i] = e.id
	}
	return ids
}

// ---------------------------------------------------------------------------
// Payload builders

// MessageEvent is a message event as Slack sends it for message.channels,
// .groups, .im and .mpim.
func (s *Server) MessageEvent(channel, user, text, ts, threadTS string) map[string]any {
	ev := map[string]any{
		"type": "message", "channel": channel, "user": user, "text": text, "ts": ts,
		"event_ts": ts, "channel_type": s.ChannelType(channel), "team": s.cfg.TeamID,
		"client_msg_id": "c-" + ts,
	}
	if threadTS != "" {
		ev["thread_ts"] = threadTS
	}
	return ev
}

// AppMentionEvent is an app_mention event (it carries no channel_type).
func (s *Server) AppMentionEvent(channel, user, text, ts, threadTS string) map[string]any {
	ev := map[string]any{
		"type": "app_mention", "channel": channel, "user": user, "text": text, "ts": ts,
		"event_ts": ts, "team": s.cfg.TeamID, "client_msg_id": "c-" + ts,
	}
	if threadTS != "" {
		ev["thread_ts"] = threadTS
	}
	return ev
}

// Say stores a person's message and pushes its message event; when the
// text mentions the bot it also pushes the app_mention event, as Slack
// does (two deliveries, two event ids, one ts). It returns the ts and the
// event ids pushed.
func (s *Server) Say(channel, threadTS, user, text string) (ts string, eventIDs []string) {
	ts = s.AddMessage(channel, threadTS, user, text)
	if strings.Contains(text, "<@"+s.cfg.BotUserID) && s.ChannelType(channel) != "im" {
		eventIDs = append(eventIDs, s.PushEvent(s.AppMentionEvent(channel, user, text, ts, threadTS)))
	}
	eventIDs = append(eventIDs, s.PushEvent(s.MessageEvent(channel, user, text, ts, threadTS)))
	return ts, eventIDs
}

// EventCallbackJSON is the Events API body for an inner event.
func (s *Server) EventCallbackJSON(eventID string, inner any) []byte {
	b, _ := json.Marshal(map[string]any{
		"token": "fake-verification-token", "team_id": s.cfg.TeamID, "api_app_id": s.cfg.AppID,
		"event": inner, "type": "event_callback", "event_id": eventID, "event_time": time.Now().Unix(),
		"authorizations":        []map[string]any{{"team_id": s.cfg.TeamID, "user_id": s.cfg.BotUserID, "is_bot": true}},
		"is_ext_shared_channel": false, "event_context": "4-fake",
	})
	return b
}

// Click describes a button press for BlockActionsJSON.
type Click struct {
	Channel   string
	MessageTS string // the card message
	ThreadTS  string // its thread, if any
	User      string
	UserName  string
	BlockID   string
	ActionID  string
	Value     string
	Label     string
}

// BlockActionsJSON is a block_actions interaction payload.
func (s *Server) BlockActionsJSON(c Click) []byte {
	s.mu.Lock()
	actionTS := s.nextTSLocked()
	trigger := s.nextIDLocked("trig-")
	s.mu.Unlock()
	container := map[string]any{"type": "message", "message_ts": c.MessageTS, "channel_id": c.Channel, "is_ephemeral": false}
	msg := map[string]any{"type": "message", "ts": c.MessageTS, "bot_id": s.cfg.BotID, "user": s.cfg.BotUserID, "text": "card"}
	if c.ThreadTS != "" {
		container["thread_ts"] = c.ThreadTS
		msg["thread_ts"] = c.ThreadTS
	}
	b, _ := json.Marshal(map[string]any{
		"type": "block_actions", "token": "fake-verification-token", "api_app_id": s.cfg.AppID,
		"team":      map[string]any{"id": s.cfg.TeamID, "domain": "fake"},
		"user":      map[string]any{"id": c.User, "username": c.UserName, "name": c.UserName, "team_id": s.cfg.TeamID},
		"container": container, "trigger_id": trigger,
		"channel":      map[string]any{"id": c.Channel, "name": "general"},
		"message":      msg,
		"response_url": s.srv.URL + "/response/" + trigger,
		"actions": []map[string]any{{
			"action_id": c.ActionID, "block_id": c.BlockID, "value": c.Value, "type": "button",
			"action_ts": actionTS, "text": map[string]any{"type": "plain_text", "text": c.Label},
		}},
	})
	return b
}

// Sign returns the X-Slack-Request-Timestamp and X-Slack-Signature headers
// for body, signed (v0) with secret at time at.
func Sign(secret string, at time.Time, body []byte) (timestamp, signature string) {
	timestamp = strconv.FormatInt(at.Unix(), 10)
	mac := hmac.New(sha256.New, []byte(secret))
	_, _ = fmt.Fprintf(mac, "v0:%s:", timestamp)
	_, _ = mac.Write(body)
	return timestamp, "v0=" + hex.EncodeToString(mac.Sum(nil))
}

// SignedRequest builds a signed POST to url with body and content type.
func SignedRequest(target, secret string, at time.Time, contentType string, body []byte) (*http.Request, error) {
	req, err := http.NewRequest(http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	ts, sig := Sign(secret, at, body)
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("X-Slack-Request-Timestamp", ts)
	req.Header.Set("X-Slack-Signature", sig)
	return req, nil
}

// InteractionForm is the form body Slack POSTs to the interactivity URL.
func InteractionForm(payload []byte) []byte {
	return []byte(url.Values{"payload": {string(payload)}}.Encode())
}
