package discordfake

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// Identify is one IDENTIFY (op 2) the gateway received.
type Identify struct {
	Intents int
	Token   string
	Path    string // "/gateway" or "/resume"
	At      time.Time
}

// Resume is one RESUME (op 6) the gateway received.
type Resume struct {
	SessionID string
	Seq       int64
	Path      string // where the client connected to resume
	Replayed  int    // events replayed after Seq
	Accepted  bool
	At        time.Time
}

type event struct {
	seq int64
	t   string
	d   json.RawMessage
}

// gateway is the fake's gateway state, guarded by Server.mu.
type gateway struct {
	session    string
	log        []event // this session's dispatches, for replay
	seq        int64
	cur        *gwConn // the connection dispatches go to (nil: none)
	conns      map[*gwConn]bool
	identifies []Identify
	resumes    []Resume
	sessions   int
}

func (g *gateway) init() { g.conns = map[*gwConn]bool{} }

// gwConn is one gateway WebSocket with its own writer, so a slow reader
// never blocks the fake's lock.
type gwConn struct {
	ws   *websocket.Conn
	path string

	mu     sync.Mutex
	queue  [][]byte
	kick   chan struct{}
	closed bool
}

func (c *gwConn) send(v any) {
	b, _ := json.Marshal(v)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	c.queue = append(c.queue, b)
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

func (c *gwConn) writer() {
	for range c.kick {
		for {
			c.mu.Lock()
			if c.closed || len(c.queue) == 0 {
				closed := c.closed
				c.mu.Unlock()
				if closed {
					return
				}
				break
			}
			b := c.queue[0]
			c.queue = c.queue[1:]
			c.mu.Unlock()
			_ = c.ws.SetWriteDeadline(time.Now().Add(5 * time.Second))
			if err := c.ws.WriteMessage(websocket.TextMessage, b); err != nil {
				c.shut()
				return
			}
		}
	}
}

func (c *gwConn) shut() {
	c.mu.Lock()
	already := c.closed
	c.closed = true
	if !already {
		close(c.kick)
	}
	c.mu.Unlock()
	if !already {
		_ = c.ws.Close()
	}
}

var upgrader = websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}

func (s *Server) serveGateway(w http.ResponseWriter, r *http.Request) {
	ws, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	c := &gwConn{ws: ws, path: strings.TrimSuffix(r.URL.Path, "/"), kick: make(chan struct{}, 1)}
	go c.writer()
	s.mu.Lock()
	s.gw.conns[c] = true
	s.mu.Unlock()
	defer func() {
		c.shut()
		s.mu.Lock()
		delete(s.gw.conns, c)
		if s.gw.cur == c {
			s.gw.cur = nil
		}
		s.notifyLocked()
		s.mu.Unlock()
	}()
	c.send(map[string]any{"op": 10, "d": map[string]any{"heartbeat_interval": s.cfg.HeartbeatInterval.Milliseconds()}})
	for {
		_, b, err := ws.ReadMessage()
		if err != nil {
			return
		}
		var f struct {
			Op int             `json:"op"`
			D  json.RawMessage `json:"d"`
		}
		if json.Unmarshal(b, &f) != nil {
			continue
		}
		switch f.Op {
		case 1:
			c.send(map[string]any{"op": 11})
		case 2:
			var d struct {
				Token   string `json:"token"`
				Intents int    `json:"intents"`
			}
			_ = json.Unmarshal(f.D, &d)
			if !s.identify(c, d.Token, d.Intents) {
				_ = ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(4004, "Authentication failed."), time.Now().Add(time.Second))
				return
			}
		case 6:
			var d struct {
				Token     string `json:"token"`
				SessionID string `json:"session_id"`
				Seq       int64  `json:"seq"`
			}
			_ = json.Unmarshal(f.D, &d)
			s.resume(c, d.SessionID, d.Seq)
		}
	}
}

func (s *Server) identify(c *gwConn, token string, intents int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.notifyLocked()
	s.gw.identifies = append(s.gw.identifies, Identify{Intents: intents, Token: token, Path: c.path, At: time.Now()})
	if s.cfg.Token != "" && strings.TrimPrefix(token, "Bot ") != s.cfg.Token {
		return false
	}
	if old := s.gw.cur; old != nil && old != c {
		go old.shut()
	}
	s.gw.sessions++
	s.gw.session = s.nextIDLocked()
	s.gw.log, s.gw.seq = nil, 0
	s.gw.cur = c
	guilds := []any{}
	for _, id := range s.guildIDsLocked() {
		guilds = append(guilds, map[string]any{"id": id, "unavailable": true})
	}
	s.gw.dispatchLocked(s, "READY", map[string]any{
		"v": 10, "session_id": s.gw.session, "resume_gateway_url": s.wsURL("/resume"),
		"user": s.cfg.Bot, "guilds": guilds, "private_channels": []any{},
		"application": map[string]any{"id": s.cfg.ApplicationID, "flags": 0},
	})
	for _, id := range s.guildIDsLocked() {
		g := s.guilds[id]
		chans, threads := []any{}, []any{}
		for _, ch := range g.Channels {
			js := s.channelJSONLocked(s.channels[ch.ID])
			if ch.Type == TypePublicThread || ch.Type == TypePrivateThread {
				threads = append(threads, js)
			} else {
				chans = append(chans, js)
			}
		}
		js := s.guildJSONLocked(g)
		js["channels"], js["threads"], js["unavailable"] = chans, threads, false
		s.gw.dispatchLocked(s, "GUILD_CREATE", js)
	}
	return true
}

func (s *Server) guildIDsLocked() []string {
	var ids []string
	for _, g := range s.cfg.Guilds {
		ids = append(ids, g.ID)
	}
	return ids
}

func (s *Server) resume(c *gwConn, session string, seq int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.notifyLocked()
	rec := Resume{SessionID: session, Seq: seq, Path: c.path, At: time.Now()}
	if session == "" || session != s.gw.session || seq > s.gw.seq {
		s.gw.resumes = append(s.gw.resumes, rec)
		c.send(map[string]any{"op": 9, "d": false})
		return
	}
	if old := s.gw.cur; old != nil && old != c {
		go old.shut()
	}
	s.gw.cur = c
	for _, e := range s.gw.log {
		if e.seq > seq-int64(s.cfg.ReplayOverlap) && e.t != "READY" && e.t != "RESUMED" {
			c.send(map[string]any{"op": 0, "s": e.seq, "t": e.t, "d": e.d})
			rec.Replayed++
		}
	}
	rec.Accepted = true
	s.gw.resumes = append(s.gw.resumes, rec)
	s.gw.dispatchLocked(s, "RESUMED", map[string]any{})
}

// dispatchLocked records a DISPATCH in the session's log and sends it to
// the live connection, if any (otherwise it waits there for a RESUME).
func (g *gateway) dispatchLocked(s *Server, t string, d any) int64 {
	b, _ := json.Marshal(d)
	if g.session == "" {
		return 0 // no session: nothing can receive or replay it
	}
	g.seq++
	e := event{seq: g.seq, t: t, d: b}
	g.log = append(g.log, e)
	if g.cur != nil {
		g.cur.send(map[string]any{"op": 0, "s": e.seq, "t": e.t, "d": e.d})
	}
	return e.seq
}

// Dispatch sends a raw DISPATCH of type t (recorded for replay).
func (s *Server) Dispatch(t string, d any) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.notifyLocked()
	return s.gw.dispatchLocked(s, t, d)
}

// Reconnect sends op 7 RECONNECT on the live connection; dispatches after
// it wait for the client's RESUME.
func (s *Server) Reconnect() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.gw.cur; c != nil {
		c.send(map[string]any{"op": 7, "d": nil})
		s.gw.cur = nil
	}
}

// InvalidSession sends op 9; a non-resumable one ends the session, so the
// client must IDENTIFY again (and what was dispatched meanwhile is gone).
func (s *Server) InvalidSession(resumable bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.gw.cur; c != nil {
		c.send(map[string]any{"op": 9, "d": resumable})
		s.gw.cur = nil
	}
	if !resumable {
		s.gw.session = ""
	}
}

// Drop cuts the live connection without a close frame.
func (s *Server) Drop() {
	s.mu.Lock()
	c := s.gw.cur
	s.gw.cur = nil
	s.mu.Unlock()
	if c != nil {
		c.shut()
	}
}

// Identifies returns the IDENTIFYs received.
func (s *Server) Identifies() []Identify {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Identify(nil), s.gw.identifies...)
}

// Resumes returns the RESUMEs received.
func (s *Server) Resumes() []Resume {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Resume(nil), s.gw.resumes...)
}

// ConnectedLocked reports (inside Wait) whether a session is live.
func (s *Server) ConnectedLocked() bool { return s.gw.cur != nil }

// ResumesLocked is Resumes for use inside a Wait condition.
func (s *Server) ResumesLocked() []Resume { return s.gw.resumes }

// IdentifiesLocked is Identifies for use inside a Wait condition.
func (s *Server) IdentifiesLocked() []Identify { return s.gw.identifies }

// WaitConnected waits for a live, identified or resumed session.
func (s *Server) WaitConnected(timeout time.Duration) bool {
	return s.Wait(timeout, s.ConnectedLocked)
}

// Msg is a person's (or another bot's) message for Say.
type Msg struct {
	Channel string // channel, thread or DM id
	Author  User
	Content string
	// Mentions, Roles and Everyone are filled from the content's <@id>,
	// <@&id>, @everyone and @here as Discord does; set them to add more.
	Mentions  []string
	Roles     []string
	Everyone  bool
	ReplyTo   string // a message id in the same channel (type 19 REPLY)
	Type      int
	WebhookID string
}

var (
	userToken = regexp.MustCompile(`<@!?(\d+)>`)
	roleToken = regexp.MustCompile(`<@&(\d+)>`)
)

// Say stores m and dispatches its MESSAGE_CREATE; it returns the id.
func (s *Server) Say(m Msg) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.notifyLocked()
	c := s.channels[m.Channel]
	if c == nil {
		c = &chanState{Channel: Channel{ID: m.Channel, Type: TypeDM}}
		s.channels[m.Channel] = c
	}
	if m.Author.ID == "" {
		m.Author = User{ID: "200000000000000001", Username: "alice"}
	}
	s.users[m.Author.ID] = m.Author
	msg := &Message{ID: s.nextIDLocked(), ChannelID: c.ID, GuildID: c.guild, Author: m.Author, Content: m.Content, Type: m.Type, At: time.Now()}
	if m.ReplyTo != "" && m.Type == 0 {
		msg.Type = 19
	}
	c.msgs = append(c.msgs, msg)
	js := s.messageJSONLocked(msg)
	mentions, seen := []any{}, map[string]bool{}
	ids := append([]string(nil), m.Mentions...)
	for _, sm := range userToken.FindAllStringSubmatch(m.Content, -1) {
		ids = append(ids, sm[1])
	}
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			mentions = append(mentions, s.userLocked(id))
		}
	}
	roles := append([]string{}, m.Roles...)
	for _, sm := range roleToken.FindAllStringSubmatch(m.Content, -1) {
		roles = append(roles, sm[1])
	}
	js["mentions"], js["mention_roles"] = mentions, roles
	js["mention_everyone"] = m.Everyone || strings.Contains(m.Content, "@everyone") || strings.Contains(m.Content, "@here")
	if m.WebhookID != "" {
		js["webhook_id"] = m.WebhookID
	}
	if c.guild != "" {
		js["member"] = map[string]any{"roles": []string{}, "nick": nil}
	}
	if m.ReplyTo != "" {
		js["message_reference"] = map[string]any{"type": 0, "message_id": m.ReplyTo, "channel_id": c.ID, "guild_id": c.guild}
		if ref := c.find(m.ReplyTo); ref != nil {
			js["referenced_message"] = s.messageJSONLocked(ref)
		} else {
			js["referenced_message"] = nil
		}
	}
	s.gw.dispatchLocked(s, "MESSAGE_CREATE", js)
	return msg.ID
}

// Edit changes a stored message and dispatches MESSAGE_UPDATE.
func (s *Server) Edit(channel, id, content string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.notifyLocked()
	c := s.channels[channel]
	if c == nil {
		return
	}
	if m := c.find(id); m != nil {
		m.Content = content
		js := s.messageJSONLocked(m)
		js["edited_timestamp"] = time.Now().UTC().Format(time.RFC3339Nano)
		s.gw.dispatchLocked(s, "MESSAGE_UPDATE", js)
	}
}

// Click is a button press for Click.
type Click struct {
	Channel, MessageID, CustomID string
	User                         User
}

// Click dispatches INTERACTION_CREATE (a message component) and returns the
// interaction id; its token is accepted for 3 s for the initial response.
func (s *Server) Click(k Click) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.notifyLocked()
	id := s.nextIDLocked()
	s.clickAt[id] = time.Now()
	c := s.channels[k.Channel]
	js := map[string]any{
		"id": id, "application_id": s.cfg.ApplicationID, "type": 3, "token": "tok-" + id, "version": 1,
		"channel_id": k.Channel, "data": map[string]any{"custom_id": k.CustomID, "component_type": 2},
	}
	if c != nil {
		if m := c.find(k.MessageID); m != nil {
			js["message"] = s.messageJSONLocked(m)
		}
	}
	if c != nil && c.guild != "" {
		js["guild_id"] = c.guild
		js["member"] = map[string]any{"user": k.User, "roles": []string{}, "permissions": "0"}
	} else {
		js["user"] = k.User
	}
	s.gw.dispatchLocked(s, "INTERACTION_CREATE", js)
	return id
}

// AddChannel adds a channel (or thread) to a guild at run time and
// dispatches CHANNEL_CREATE / THREAD_CREATE.
func (s *Server) AddChannel(guild string, ch Channel) {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.notifyLocked()
	c := &chanState{Channel: ch, guild: guild}
	s.channels[ch.ID] = c
	t := "CHANNEL_CREATE"
	if ch.Type == TypePublicThread || ch.Type == TypePrivateThread {
		t = "THREAD_CREATE"
	}
	s.gw.dispatchLocked(s, t, s.channelJSONLocked(c))
}
