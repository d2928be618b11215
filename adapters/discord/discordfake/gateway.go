package discordfake

import (
	"encoding/json"
	"net/http"
	"regexp"
	"slices"
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
	// sessions are the resumable sessions, oldest first: at most one
	// unless Config.MultiSession.
	sessions   []*session
	conns      map[*gwConn]bool
	identifies []Identify
	resumes    []Resume
}

// session is one identified gateway session: its own id, sequence and
// replay log, and the connection it is attached to (nil: none, so
// dispatches wait in the log for a RESUME).
type session struct {
	id  string
	log []event
	seq int64
	cur *gwConn
}

func (g *gateway) init() { g.conns = map[*gwConn]bool{} }

func (g *gateway) find(id string) *session {
	for _, ss := range g.sessions {
		if ss.id == id {
			return ss
		}
	}
	return nil
}

// detach takes c off any session it is attached to.
func (g *gateway) detach(c *gwConn) {
	for _, ss := range g.sessions {
		if ss.cur == c {
			ss.cur = nil
		}
	}
}

// attach makes c the connection of ss, closing the one it replaces.
func (g *gateway) attach(ss *session, c *gwConn) {
	g.detach(c)
	if old := ss.cur; old != nil && old != c {
		go old.shut()
	}
	ss.cur = c
}

// dispatch records one DISPATCH in the session's log and sends it to its
// connection, if any.
func (ss *session) dispatch(t string, b json.RawMessage) int64 {
	ss.seq++
	e := event{seq: ss.seq, t: t, d: b}
	ss.log = append(ss.log, e)
	if ss.cur != nil {
		ss.cur.send(map[string]any{"op": 0, "s": e.seq, "t": e.t, "d": e.d})
	}
	return e.seq
}

// gwConn is one gateway WebSocket with its own writer, so a slow reader
// never blocks the fake's lock.
type gwConn struct {
	ws   *websocket.Conn
	path string

	mu     sync.Mutex
	queue  [][]byte
	kick   chan struct{}
	closed bool
	// closeCode, with a nil frame in queue, is the close frame to send
	// there (closeWith).
	closeCode int
	closeText string
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

// sendRaw queues frame as it is.
func (c *gwConn) sendRaw(frame []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	c.queue = append(c.queue, append([]byte(nil), frame...))
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// closeWith sends a close frame with code, after what is queued has been
// written, and closes the connection.
func (c *gwConn) closeWith(code int, text string) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closeCode, c.closeText = code, text
	c.mu.Unlock()
	c.sendRaw(nil)
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
			code, text := c.closeCode, c.closeText
			c.mu.Unlock()
			if b == nil && code != 0 {
				_ = c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, text), time.Now().Add(time.Second))
				c.shut()
				return
			}
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
		s.gw.detach(c)
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
	if !s.cfg.MultiSession {
		// One session: a new IDENTIFY ends the previous one.
		for _, old := range s.gw.sessions {
			if old.cur != nil && old.cur != c {
				go old.cur.shut()
			}
		}
		s.gw.sessions = nil
	}
	ss := &session{id: s.nextIDLocked()}
	s.gw.sessions = append(s.gw.sessions, ss)
	s.gw.attach(ss, c)
	send := func(t string, d any) {
		b, _ := json.Marshal(d)
		ss.dispatch(t, b)
	}
	guilds := []any{}
	for _, id := range s.guildIDsLocked() {
		guilds = append(guilds, map[string]any{"id": id, "unavailable": true})
	}
	if ready := s.readyLocked(ss.id); ready != nil {
		ss.dispatch("READY", ready)
	} else {
		send("READY", map[string]any{
			"v": 10, "session_id": ss.id, "resume_gateway_url": s.wsURL("/resume"),
			"user": s.cfg.Bot, "guilds": guilds, "private_channels": []any{},
			"application": map[string]any{"id": s.cfg.ApplicationID, "flags": 0},
		})
	}
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
		send("GUILD_CREATE", js)
	}
	return true
}

// readyLocked is Config.Ready's d with session_id set to id (nil: none
// configured, or not a JSON object).
func (s *Server) readyLocked(id string) json.RawMessage {
	if len(s.cfg.Ready) == 0 {
		return nil
	}
	var frame struct {
		T string          `json:"t"`
		D json.RawMessage `json:"d"`
	}
	raw := s.cfg.Ready
	if json.Unmarshal(raw, &frame) == nil && frame.T == "READY" && len(frame.D) > 0 {
		raw = frame.D
	}
	var d map[string]json.RawMessage
	if json.Unmarshal(raw, &d) != nil || d == nil {
		return nil
	}
	d["session_id"], _ = json.Marshal(id)
	b, _ := json.Marshal(d)
	return b
}

func (s *Server) guildIDsLocked() []string {
	var ids []string
	for _, g := range s.cfg.Guilds {
		ids = append(ids, g.ID)
	}
	return ids
}

func (s *Server) resume(c *gwConn, id string, seq int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.notifyLocked()
	rec := Resume{SessionID: id, Seq: seq, Path: c.path, At: time.Now()}
	ss := s.gw.find(id)
	if id == "" || ss == nil || seq > ss.seq {
		s.gw.resumes = append(s.gw.resumes, rec)
		c.send(map[string]any{"op": 9, "d": false})
		return
	}
	s.gw.attach(ss, c)
	for _, e := range ss.log {
		if e.seq > seq-int64(s.cfg.ReplayOverlap) && e.t != "READY" && e.t != "RESUMED" {
			c.send(map[string]any{"op": 0, "s": e.seq, "t": e.t, "d": e.d})
			rec.Replayed++
		}
	}
	rec.Accepted = true
	s.gw.resumes = append(s.gw.resumes, rec)
	ss.dispatch("RESUMED", json.RawMessage(`{}`))
}

// dispatchLocked records a DISPATCH in every session's log and sends it to
// each session's live connection, if any (otherwise it waits there for a
// RESUME), as Discord does for several sessions of one shard. It returns
// the sequence in the newest session (0: no session, so nothing can
// receive or replay it).
func (g *gateway) dispatchLocked(t string, d any) int64 {
	b, _ := json.Marshal(d)
	var seq int64
	for _, ss := range g.sessions {
		seq = ss.dispatch(t, b)
	}
	return seq
}

// Dispatch sends a raw DISPATCH of type t (recorded for replay).
func (s *Server) Dispatch(t string, d any) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.notifyLocked()
	return s.gw.dispatchLocked(t, d)
}

// Reconnect sends op 7 RECONNECT on every live connection; dispatches after
// it wait for the client's RESUME.
func (s *Server) Reconnect() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ss := range s.gw.sessions {
		if c := ss.cur; c != nil {
			c.send(map[string]any{"op": 7, "d": nil})
			ss.cur = nil
		}
	}
}

// SendFrame sends frame, a raw gateway frame as Discord sent it (e.g. a
// captured one), on every live connection, as is. An op 7 then works as
// Reconnect and an op 9 as InvalidSession (its d says whether resumable);
// anything else leaves the connections as they are.
func (s *Server) SendFrame(frame json.RawMessage) {
	var f struct {
		Op int             `json:"op"`
		D  json.RawMessage `json:"d"`
	}
	_ = json.Unmarshal(frame, &f)
	s.mu.Lock()
	defer s.mu.Unlock()
	if f.Op != 7 && f.Op != 9 {
		for _, ss := range s.gw.sessions {
			if ss.cur != nil {
				ss.cur.sendRaw(frame)
			}
		}
		return
	}
	for _, c := range s.gw.detachAllLocked() {
		c.sendRaw(frame)
	}
	if f.Op == 9 && string(f.D) != "true" {
		s.gw.sessions = nil
	}
}

// CloseWith closes every live connection with a close frame of code (4000
// to 4014 are Discord's). 4007 (invalid seq) and 4009 (session timed out)
// end the sessions, as Discord does: they cannot be resumed, so clients
// must IDENTIFY again (and what is dispatched meanwhile is gone); after
// other codes the sessions stay resumable.
func (s *Server) CloseWith(code int, text string) {
	s.mu.Lock()
	conns := s.gw.detachAllLocked()
	if code == 4007 || code == 4009 {
		s.gw.sessions = nil
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.closeWith(code, text)
	}
}

// InvalidSession sends op 9 on every live connection; a non-resumable one
// ends the sessions, so clients must IDENTIFY again (and what was
// dispatched meanwhile is gone).
func (s *Server) InvalidSession(resumable bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ss := range s.gw.sessions {
		if c := ss.cur; c != nil {
			c.send(map[string]any{"op": 9, "d": resumable})
			ss.cur = nil
		}
	}
	if !resumable {
		s.gw.sessions = nil
	}
}

// Drop cuts every live connection without a close frame.
func (s *Server) Drop() {
	s.mu.Lock()
	conns := s.gw.detachAllLocked()
	s.mu.Unlock()
	for _, c := range conns {
		c.shut()
	}
}

// detachAllLocked takes every session off its live connection and returns
// those connections.
func (g *gateway) detachAllLocked() []*gwConn {
	var conns []*gwConn
	for _, ss := range g.sessions {
		if ss.cur != nil {
			conns = append(conns, ss.cur)
			ss.cur = nil
		}
	}
	return conns
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
func (s *Server) ConnectedLocked() bool { return s.LiveSessionsLocked() > 0 }

// LiveSessionsLocked is (inside Wait) how many sessions have a connection.
func (s *Server) LiveSessionsLocked() int {
	n := 0
	for _, ss := range s.gw.sessions {
		if ss.cur != nil {
			n++
		}
	}
	return n
}

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
	// Attachments are attachment objects from HostFile.
	Attachments []map[string]any
}

var (
	userToken = regexp.MustCompile(`<@!?(\d+)>`)
	roleToken = regexp.MustCompile(`<@&(\d+)>`)
)

// Say stores m and dispatches its MESSAGE_CREATE; it returns the id.
func (s *Server) Say(m Msg) string { return s.say(m, true) }

// Missed stores m in its channel's history without dispatching it: a
// message sent while the bot had no session, whatever the bot's
// reconnect has reached by then (gap fill reads it from the history).
func (s *Server) Missed(m Msg) string { return s.say(m, false) }

func (s *Server) say(m Msg, dispatch bool) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.notifyLocked()
	c := s.channels[m.Channel]
	if c == nil {
		c = &chanState{Channel: Channel{ID: m.Channel, Type: TypeDM}}
		if m.Author.ID != "" && !m.Author.Bot {
			c.Recipients = []string{m.Author.ID}
		}
		s.channels[m.Channel] = c
	}
	if m.Author.ID == "" {
		m.Author = User{ID: "200000000000000001", Username: "alice"}
	}
	s.memberOnSayLocked(c.guild, m.Author)
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
	msg.mentions, msg.roles, msg.everyone = mentions, roles, js["mention_everyone"].(bool)
	if m.WebhookID != "" {
		js["webhook_id"] = m.WebhookID
	}
	if len(m.Attachments) > 0 {
		js["attachments"] = m.Attachments
		msg.attachments = m.Attachments // REST reads carry them too
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
	if dispatch {
		s.gw.dispatchLocked("MESSAGE_CREATE", js)
	}
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
		s.gw.dispatchLocked("MESSAGE_UPDATE", js)
	}
}

// Click is a button press for Click.
type Click struct {
	Channel, MessageID, CustomID string
	User                         User
}

// Click dispatches INTERACTION_CREATE (a message component) and returns the
// interaction id; its token is accepted for 3 s for the initial response,
// once (a second acknowledgement is 400, code 40060).
//
// With MultiSession it goes to every session like any dispatch: Discord does
// not document that an interaction reaches only one session, so the fake
// takes the harder case.
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
	s.gw.dispatchLocked("INTERACTION_CREATE", js)
	return id
}

// SetRole adds a role to a guild, or replaces the one with its id, and
// dispatches GUILD_ROLE_CREATE or GUILD_ROLE_UPDATE.
func (s *Server) SetRole(guild string, r Role) {
	s.changeGuild(guild, func(g *Guild) {
		t := "GUILD_ROLE_CREATE"
		if i := slices.IndexFunc(g.Roles, func(x Role) bool { return x.ID == r.ID }); i >= 0 {
			g.Roles[i], t = r, "GUILD_ROLE_UPDATE"
		} else {
			g.Roles = append(g.Roles, r)
		}
		s.gw.dispatchLocked(t, map[string]any{"guild_id": guild, "role": roleJSON(guild, r)})
	})
}

// DeleteRole removes a role from a guild and dispatches GUILD_ROLE_DELETE.
func (s *Server) DeleteRole(guild, role string) {
	s.changeGuild(guild, func(g *Guild) {
		g.Roles = slices.DeleteFunc(g.Roles, func(x Role) bool { return x.ID == role })
		s.gw.dispatchLocked("GUILD_ROLE_DELETE", map[string]any{"guild_id": guild, "role_id": role})
	})
}

// changeGuild runs fn on a known guild under the lock.
func (s *Server) changeGuild(id string, fn func(g *Guild)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.notifyLocked()
	if g := s.guilds[id]; g != nil {
		fn(g)
	}
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
	s.gw.dispatchLocked(t, s.channelJSONLocked(c))
}
