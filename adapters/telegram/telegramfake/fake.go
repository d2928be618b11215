// Package telegramfake is a local, in-process fake of the parts of the
// Telegram Bot API that Marlowe uses: getMe, getUpdates (offset
// confirmation and long-poll semantics, 409 while a webhook is set),
// sendMessage (message_thread_id, reply_parameters, inline keyboards),
// editMessageText, answerCallbackQuery, setMessageReaction, sendChatAction,
// setWebhook / deleteWebhook (and pushing updates to the webhook with the
// secret header, retrying non-2xx like Telegram), getChatAdministrators and
// getChatMember. It can answer 429 with retry_after.
//
// The real SDK client talks to it at {URL}/bot{token}/{method}: point
// MARLOWE_TELEGRAM_API_URL (or Config.APIURL) at Server.URL(). It is strict
// where Telegram is and a bug would hide: text over 4,096 UTF-16 units,
// message_thread_id 1, callback_data over 64 bytes and an unchanged edit
// are refused as Telegram refuses them. It listens on loopback only.
package telegramfake

import (
	"bytes"
	"context"
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
	"unicode/utf16"
)

// Config describes the fake bot. Zero values get defaults.
type Config struct {
	Token     string // default "123456:TEST-token-0123456789"
	BotID     int64  // default 123456
	Username  string // default "marlowe_test_bot"
	FirstName string // default "Marlowe"
	// ReadAllGroupMessages is getMe's can_read_all_group_messages (false =
	// privacy mode on, as Telegram's default).
	ReadAllGroupMessages bool
	// MaxPollWait caps a getUpdates long poll (default: the timeout asked).
	MaxPollWait time.Duration
	// WebhookRetry is the wait before a webhook delivery that failed is
	// retried (default 100ms).
	WebhookRetry time.Duration
}

// User is a Telegram account.
type User struct {
	ID        int64  `json:"id"`
	IsBot     bool   `json:"is_bot"`
	FirstName string `json:"first_name"`
	Username  string `json:"username,omitempty"`
}

// Chat is a Telegram chat.
type Chat struct {
	ID      int64  `json:"id"`
	Type    string `json:"type"` // private | group | supergroup | channel
	Title   string `json:"title,omitempty"`
	IsForum bool   `json:"is_forum,omitempty"`
}

// Entity is a MessageEntity (offsets in UTF-16 units).
type Entity struct {
	Type   string `json:"type"`
	Offset int    `json:"offset"`
	Length int    `json:"length"`
	User   *User  `json:"user,omitempty"`
}

// Incoming is a person's message to inject as an update.
type Incoming struct {
	Chat     Chat
	From     User
	Text     string
	Entities []Entity // nil: mentions and /commands are found automatically
	Topic    int64    // forum topic (message_thread_id); 0 = none
	ReplyTo  int64    // message id replied to in the same chat
	Edit     int64    // when set, an edited_message of this message id
	Caption  bool     // send Text as a caption (a photo with a caption)
	Service  bool     // a service message (new_chat_members) instead
}

// Sent is one accepted sendMessage.
type Sent struct {
	ChatID    int64
	MessageID int64
	Topic     int64 // message_thread_id sent (0 = none)
	ReplyTo   int64 // reply_parameters.message_id (0 = none)
	Text      string
	Keyboard  [][]Button
}

// Button is one inline keyboard button.
type Button struct {
	Text         string `json:"text"`
	CallbackData string `json:"callback_data"`
}

// Edit is one accepted editMessageText.
type Edit struct {
	ChatID    int64
	MessageID int64
	Text      string
	Keyboard  [][]Button
	HasMarkup bool
}

// Answer is one answerCallbackQuery.
type Answer struct {
	ID        string
	Text      string
	ShowAlert bool
	At        time.Time
}

// Reaction is one setMessageReaction.
type Reaction struct {
	ChatID, MessageID int64
	Emoji             string
}

// Call is one Bot API request as the fake answered it.
type Call struct {
	Method string
	Params url.Values
	Status int
}

// WebhookDelivery is one POST the fake made to the webhook.
type WebhookDelivery struct {
	UpdateID int64
	Status   int // 0 = transport error
}

type stored struct {
	Chat  Chat
	From  User
	Text  string
	Topic int64
	Reply int64
	Kb    [][]Button
}

// Server is a running fake. Close it when done.
type Server struct {
	cfg Config
	srv *httptest.Server

	mu       sync.Mutex
	changed  chan struct{}
	closed   bool
	nextUpd  int64
	nextMsg  map[int64]int64
	updates  []json.RawMessage // unconfirmed, in order
	updIDs   []int64
	msgs     map[[2]int64]*stored
	sent     []Sent
	edits    []Edit
	answers  []Answer
	reacts   []Reaction
	actions  []string
	calls    []Call
	limits   map[string][]time.Duration
	admins   map[int64][]int64 // chat → admin ids (first is the creator)
	cbs      map[string]bool   // issued callback query ids
	polling  int               // getUpdates calls in flight
	conflict int               // getUpdates refused because another was in flight
	hookURL  string
	hookSec  string
	hookLog  []WebhookDelivery
	hookStop chan struct{}
	hookDone chan struct{}
}

// New starts a fake Bot API on a loopback port.
func New(cfg Config) *Server {
	if cfg.Token == "" {
		cfg.Token = "123456:TEST-token-0123456789"
	}
	if cfg.BotID == 0 {
		cfg.BotID = 123456
	}
	if cfg.Username == "" {
		cfg.Username = "marlowe_test_bot"
	}
	if cfg.FirstName == "" {
		cfg.FirstName = "Marlowe"
	}
	if cfg.WebhookRetry <= 0 {
		cfg.WebhookRetry = 100 * time.Millisecond
	}
	s := &Server{
		cfg: cfg, changed: make(chan struct{}), nextUpd: 1000,
		nextMsg: map[int64]int64{}, msgs: map[[2]int64]*stored{},
		limits: map[string][]time.Duration{}, admins: map[int64][]int64{}, cbs: map[string]bool{},
	}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// URL is the API base (MARLOWE_TELEGRAM_API_URL).
func (s *Server) URL() string { return s.srv.URL }

// Config returns the effective configuration.
func (s *Server) Config() Config { return s.cfg }

// Bot is the bot's own account.
func (s *Server) Bot() User {
	return User{ID: s.cfg.BotID, IsBot: true, FirstName: s.cfg.FirstName, Username: s.cfg.Username}
}

// Close stops webhook pushing and the server.
func (s *Server) Close() {
	s.mu.Lock()
	s.closed = true
	s.notifyLocked()
	s.mu.Unlock()
	s.stopHook()
	s.srv.CloseClientConnections()
	s.srv.Close()
}

func (s *Server) notifyLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// Wait blocks until cond() is true (re-checked on every change to the fake)
// or ctx ends. cond may call the fake's getters.
func (s *Server) Wait(ctx context.Context, cond func() bool) error {
	for {
		s.mu.Lock()
		ch := s.changed
		s.mu.Unlock()
		if cond() {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		}
	}
}

// ---- scripting

// RateLimit makes the next n calls to method answer 429 with retry_after
// (whole seconds on the wire; sub-second values are sent as 1 s's
// fraction via the description only, so tests use Telegram's real unit).
func (s *Server) RateLimit(method string, n int, retryAfter time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range n {
		s.limits[method] = append(s.limits[method], retryAfter)
	}
}

// ClearRateLimit drops the 429s still queued for method.
func (s *Server) ClearRateLimit(method string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.limits, method)
}

// SetAdmins sets a group's administrators; the first is the creator.
func (s *Server) SetAdmins(chat int64, users ...int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.admins[chat] = users
}

// Inject queues a person's message as an update and returns its update id
// and message id.
func (s *Server) Inject(in Incoming) (updateID, messageID int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	msgID := in.Edit
	if msgID == 0 {
		s.nextMsg[in.Chat.ID]++
		msgID = s.nextMsg[in.Chat.ID] + 100
	}
	ents := in.Entities
	if ents == nil {
		ents = autoEntities(in.Text)
	}
	m := map[string]any{
		"message_id": msgID, "from": in.From, "chat": in.Chat, "date": time.Now().Unix(),
	}
	switch {
	case in.Service:
		m["new_chat_members"] = []User{in.From}
	case in.Caption:
		m["caption"] = in.Text
		m["photo"] = []map[string]any{{"file_id": "f", "file_unique_id": "u", "width": 1, "height": 1}}
		if len(ents) > 0 {
			m["caption_entities"] = ents
		}
	default:
		m["text"] = in.Text
		if len(ents) > 0 {
			m["entities"] = ents
		}
	}
	if in.Topic != 0 {
		m["message_thread_id"] = in.Topic
		m["is_topic_message"] = true
	}
	switch {
	case in.ReplyTo != 0:
		m["reply_to_message"] = s.renderLocked(in.Chat.ID, in.ReplyTo)
	case in.Topic != 0:
		// Telegram's quirk: a topic message replies to the topic's creation.
		m["reply_to_message"] = map[string]any{
			"message_id": in.Topic, "chat": in.Chat, "date": time.Now().Unix(), "from": in.From,
			"message_thread_id": in.Topic, "is_topic_message": true,
			"forum_topic_created": map[string]any{"name": "topic", "icon_color": 0},
		}
	}
	if in.Edit != 0 {
		m["edit_date"] = time.Now().Unix()
	} else if !in.Service {
		s.msgs[[2]int64{in.Chat.ID, msgID}] = &stored{Chat: in.Chat, From: in.From, Text: in.Text, Topic: in.Topic, Reply: in.ReplyTo}
	}
	kind := "message"
	if in.Edit != 0 {
		kind = "edited_message"
	}
	s.nextUpd++
	id := s.nextUpd
	raw, _ := json.Marshal(map[string]any{"update_id": id, kind: m})
	s.updates = append(s.updates, raw)
	s.updIDs = append(s.updIDs, id)
	s.notifyLocked()
	return id, msgID
}

// Click queues a callback query: from presses the button with data on the
// bot's message messageID in chat. It returns the update id and the
// callback query id.
func (s *Server) Click(chat int64, messageID int64, from User, data string) (updateID int64, queryID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextUpd++
	id := s.nextUpd
	queryID = "cbq" + strconv.FormatInt(id, 10)
	s.cbs[queryID] = true
	cb := map[string]any{"id": queryID, "from": from, "chat_instance": "ci", "data": data,
		"message": s.renderLocked(chat, messageID)}
	raw, _ := json.Marshal(map[string]any{"update_id": id, "callback_query": cb})
	s.updates = append(s.updates, raw)
	s.updIDs = append(s.updIDs, id)
	s.notifyLocked()
	return id, queryID
}

func (s *Server) renderLocked(chat, msgID int64) map[string]any {
	m := map[string]any{"message_id": msgID, "date": time.Now().Unix(), "chat": Chat{ID: chat, Type: "supergroup"}}
	if st := s.msgs[[2]int64{chat, msgID}]; st != nil {
		m["chat"], m["from"], m["text"] = st.Chat, st.From, st.Text
		if st.Topic != 0 {
			m["message_thread_id"], m["is_topic_message"] = st.Topic, true
		}
		if len(st.Kb) > 0 {
			m["reply_markup"] = map[string]any{"inline_keyboard": st.Kb}
		}
		if st.Reply != 0 {
			m["reply_to_message"] = map[string]any{"message_id": st.Reply, "chat": st.Chat, "date": time.Now().Unix()}
		}
	}
	return m
}

// autoEntities finds @mentions and /commands the way Telegram's clients
// mark them, with UTF-16 offsets.
func autoEntities(text string) []Entity {
	var out []Entity
	units := utf16.Encode([]rune(text))
	isWord := func(u uint16) bool {
		return u == '_' || u >= '0' && u <= '9' || u >= 'a' && u <= 'z' || u >= 'A' && u <= 'Z'
	}
	for i := 0; i < len(units); i++ {
		if (units[i] != '@' && units[i] != '/') || (i > 0 && units[i-1] != ' ' && units[i-1] != '\n') {
			continue
		}
		j := i + 1
		for j < len(units) && (isWord(units[j]) || (units[i] == '/' && units[j] == '@')) {
			j++
		}
		if j-i < 2 {
			continue
		}
		typ := "mention"
		if units[i] == '/' {
			if i != 0 {
				continue
			}
			typ = "bot_command"
		}
		out = append(out, Entity{Type: typ, Offset: i, Length: j - i})
		i = j
	}
	return out
}

// ---- getters

// Sent returns every accepted sendMessage, in order.
func (s *Server) Sent() []Sent {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Sent(nil), s.sent...)
}

// Edits returns every accepted editMessageText, in order.
func (s *Server) Edits() []Edit {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Edit(nil), s.edits...)
}

// Answers returns every answerCallbackQuery, in order.
func (s *Server) Answers() []Answer {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Answer(nil), s.answers...)
}

// Reactions returns every setMessageReaction, in order.
func (s *Server) Reactions() []Reaction {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Reaction(nil), s.reacts...)
}

// Calls returns every request, in order.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Call(nil), s.calls...)
}

// CallCount counts requests to method (any status).
func (s *Server) CallCount(method string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.calls {
		if c.Method == method {
			n++
		}
	}
	return n
}

// Conflicts counts getUpdates calls refused with 409 because another
// poller's call was in flight.
func (s *Server) Conflicts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conflict
}

// Pending lists the update ids not yet confirmed.
func (s *Server) Pending() []int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int64(nil), s.updIDs...)
}

// Webhook returns the registered URL and secret.
func (s *Server) Webhook() (url, secret string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hookURL, s.hookSec
}

// WebhookDeliveries lists the POSTs made to the webhook, in order.
func (s *Server) WebhookDeliveries() []WebhookDelivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]WebhookDelivery(nil), s.hookLog...)
}

// ---- Bot API

type apiErr struct {
	code  int
	desc  string
	retry int
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	rest, ok := strings.CutPrefix(r.URL.Path, "/bot")
	tok, method, ok2 := strings.Cut(rest, "/")
	form := url.Values{}
	if ct := r.Header.Get("Content-Type"); strings.HasPrefix(ct, "application/json") {
		var m map[string]any
		_ = json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&m)
		for k, v := range m {
			if s, isStr := v.(string); isStr {
				form.Set(k, s)
			} else {
				b, _ := json.Marshal(v)
				form.Set(k, string(b))
			}
		}
	} else {
		_ = r.ParseForm()
		form = r.Form
	}
	var result any
	var e *apiErr
	switch {
	case !ok || !ok2:
		e = &apiErr{code: 404, desc: "Not Found"}
	case tok != s.cfg.Token:
		e = &apiErr{code: 401, desc: "Unauthorized"}
	default:
		result, e = s.dispatch(r.Context(), method, form)
	}
	status := 200
	w.Header().Set("Content-Type", "application/json")
	if e != nil {
		status = e.code
		body := map[string]any{"ok": false, "error_code": e.code, "description": e.desc}
		if e.retry > 0 {
			body["parameters"] = map[string]any{"retry_after": e.retry}
		}
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(body)
	} else {
		_ = json.NewEncoder(w).Encode(map[string]any{"ok": true, "result": result})
	}
	s.mu.Lock()
	s.calls = append(s.calls, Call{Method: method, Params: form, Status: status})
	s.notifyLocked()
	s.mu.Unlock()
}

func (s *Server) dispatch(ctx context.Context, method string, f url.Values) (any, *apiErr) {
	s.mu.Lock()
	if q := s.limits[method]; len(q) > 0 {
		s.limits[method] = q[1:]
		s.mu.Unlock()
		sec := int(q[0] / time.Second)
		if sec < 1 {
			sec = 1
		}
		return nil, &apiErr{code: 429, desc: fmt.Sprintf("Too Many Requests: retry after %d", sec), retry: sec}
	}
	s.mu.Unlock()
	switch method {
	case "getMe":
		return map[string]any{"id": s.cfg.BotID, "is_bot": true, "first_name": s.cfg.FirstName,
			"username": s.cfg.Username, "can_join_groups": true,
			"can_read_all_group_messages": s.cfg.ReadAllGroupMessages, "supports_inline_queries": false}, nil
	case "getUpdates":
		return s.getUpdates(ctx, f)
	case "sendMessage":
		return s.sendMessage(f)
	case "editMessageText":
		return s.editMessageText(f)
	case "answerCallbackQuery":
		s.mu.Lock()
		defer s.mu.Unlock()
		id := f.Get("callback_query_id")
		if !s.cbs[id] {
			return nil, &apiErr{code: 400, desc: "Bad Request: query is too old and response timeout expired or query ID is invalid"}
		}
		delete(s.cbs, id)
		s.answers = append(s.answers, Answer{ID: id, Text: f.Get("text"), ShowAlert: f.Get("show_alert") == "true", At: time.Now()})
		return true, nil
	case "setMessageReaction":
		var rs []struct {
			Emoji string `json:"emoji"`
		}
		if err := json.Unmarshal([]byte(f.Get("reaction")), &rs); err != nil || len(rs) != 1 {
			return nil, &apiErr{code: 400, desc: "Bad Request: REACTION_INVALID"}
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		s.reacts = append(s.reacts, Reaction{ChatID: atoi(f.Get("chat_id")), MessageID: atoi(f.Get("message_id")), Emoji: rs[0].Emoji})
		return true, nil
	case "sendChatAction":
		s.mu.Lock()
		defer s.mu.Unlock()
		s.actions = append(s.actions, f.Get("action"))
		return true, nil
	case "setWebhook":
		return s.setWebhook(f.Get("url"), f.Get("secret_token"))
	case "deleteWebhook":
		return s.setWebhook("", "")
	case "getWebhookInfo":
		s.mu.Lock()
		defer s.mu.Unlock()
		return map[string]any{"url": s.hookURL, "pending_update_count": len(s.updates)}, nil
	case "getChatAdministrators":
		s.mu.Lock()
		defer s.mu.Unlock()
		var out []map[string]any
		for i, id := range s.admins[atoi(f.Get("chat_id"))] {
			st := "administrator"
			if i == 0 {
				st = "creator"
			}
			out = append(out, map[string]any{"status": st, "user": User{ID: id, FirstName: "admin"}})
		}
		return out, nil
	case "getChatMember":
		s.mu.Lock()
		defer s.mu.Unlock()
		uid := atoi(f.Get("user_id"))
		st := "member"
		for i, id := range s.admins[atoi(f.Get("chat_id"))] {
			if id == uid {
				st = "administrator"
				if i == 0 {
					st = "creator"
				}
			}
		}
		return map[string]any{"status": st, "user": User{ID: uid, FirstName: "x"}}, nil
	}
	return nil, &apiErr{code: 404, desc: "Not Found: method not found"}
}

func atoi(s string) int64 { n, _ := strconv.ParseInt(s, 10, 64); return n }

func (s *Server) getUpdates(ctx context.Context, f url.Values) (any, *apiErr) {
	offset := atoi(f.Get("offset"))
	timeout := time.Duration(atoi(f.Get("timeout"))) * time.Second
	if s.cfg.MaxPollWait > 0 && timeout > s.cfg.MaxPollWait {
		timeout = s.cfg.MaxPollWait
	}
	limit := int(atoi(f.Get("limit")))
	if limit <= 0 || limit > 100 {
		limit = 100
	}
	s.mu.Lock()
	if s.polling > 0 {
		// One poller per token: Telegram refuses concurrent getUpdates.
		s.conflict++
		s.mu.Unlock()
		return nil, &apiErr{code: 409, desc: "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running"}
	}
	s.polling++
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.polling--
		s.mu.Unlock()
	}()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		if s.hookURL != "" {
			s.mu.Unlock()
			return nil, &apiErr{code: 409, desc: "Conflict: can't use getUpdates method while webhook is active; use deleteWebhook to delete the webhook first"}
		}
		// An offset confirms every update before it: they are gone.
		if offset > 0 {
			for len(s.updIDs) > 0 && s.updIDs[0] < offset {
				s.updIDs, s.updates = s.updIDs[1:], s.updates[1:]
				s.notifyLocked()
			}
		}
		var out []json.RawMessage
		for i, id := range s.updIDs {
			if id >= offset && len(out) < limit {
				out = append(out, s.updates[i])
			}
		}
		ch, closed := s.changed, s.closed
		s.mu.Unlock()
		if len(out) > 0 || timeout == 0 || closed {
			if out == nil {
				out = []json.RawMessage{}
			}
			return out, nil
		}
		select {
		case <-ch:
		case <-deadline.C:
			return []json.RawMessage{}, nil
		case <-ctx.Done():
			return []json.RawMessage{}, nil
		}
	}
}

func (s *Server) parseKeyboard(raw string) ([][]Button, *apiErr) {
	if raw == "" {
		return nil, nil
	}
	var kb struct {
		InlineKeyboard [][]Button `json:"inline_keyboard"`
	}
	if err := json.Unmarshal([]byte(raw), &kb); err != nil {
		return nil, &apiErr{code: 400, desc: "Bad Request: can't parse reply keyboard markup JSON object"}
	}
	for _, row := range kb.InlineKeyboard {
		for _, b := range row {
			if n := len(b.CallbackData); n == 0 || n > 64 {
				return nil, &apiErr{code: 400, desc: "Bad Request: BUTTON_DATA_INVALID"}
			}
		}
	}
	return kb.InlineKeyboard, nil
}

func textOK(t string) *apiErr {
	switch n := len(utf16.Encode([]rune(t))); {
	case strings.TrimSpace(t) == "":
		return &apiErr{code: 400, desc: "Bad Request: message text is empty"}
	case n > 4096:
		return &apiErr{code: 400, desc: "Bad Request: message is too long"}
	}
	return nil
}

func (s *Server) sendMessage(f url.Values) (any, *apiErr) {
	chat := atoi(f.Get("chat_id"))
	if chat == 0 {
		return nil, &apiErr{code: 400, desc: "Bad Request: chat not found"}
	}
	text := f.Get("text")
	if e := textOK(text); e != nil {
		return nil, e
	}
	topic := atoi(f.Get("message_thread_id"))
	if f.Has("message_thread_id") && topic <= 1 {
		// Telegram: General is "no thread id"; sending 1 is refused.
		return nil, &apiErr{code: 400, desc: "Bad Request: message thread not found"}
	}
	kb, e := s.parseKeyboard(f.Get("reply_markup"))
	if e != nil {
		return nil, e
	}
	var reply int64
	if rp := f.Get("reply_parameters"); rp != "" {
		var p struct {
			MessageID int64 `json:"message_id"`
		}
		if err := json.Unmarshal([]byte(rp), &p); err != nil {
			return nil, &apiErr{code: 400, desc: "Bad Request: can't parse reply parameters JSON object"}
		}
		reply = p.MessageID
	} else if v := f.Get("reply_to_message_id"); v != "" {
		reply = atoi(v)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextMsg[chat]++
	id := s.nextMsg[chat] + 100
	ct := "supergroup"
	if chat > 0 {
		ct = "private"
	}
	s.msgs[[2]int64{chat, id}] = &stored{Chat: Chat{ID: chat, Type: ct}, From: s.Bot(), Text: text, Topic: topic, Reply: reply, Kb: kb}
	s.sent = append(s.sent, Sent{ChatID: chat, MessageID: id, Topic: topic, ReplyTo: reply, Text: text, Keyboard: kb})
	m := map[string]any{"message_id": id, "from": s.Bot(), "chat": Chat{ID: chat, Type: ct}, "date": time.Now().Unix(), "text": text}
	if topic != 0 {
		m["message_thread_id"], m["is_topic_message"] = topic, true
	}
	return m, nil
}

func (s *Server) editMessageText(f url.Values) (any, *apiErr) {
	chat, id := atoi(f.Get("chat_id")), atoi(f.Get("message_id"))
	text := f.Get("text")
	if e := textOK(text); e != nil {
		return nil, e
	}
	kb, e := s.parseKeyboard(f.Get("reply_markup"))
	if e != nil {
		return nil, e
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.msgs[[2]int64{chat, id}]
	if st == nil || st.From.ID != s.cfg.BotID {
		return nil, &apiErr{code: 400, desc: "Bad Request: message to edit not found"}
	}
	has := f.Get("reply_markup") != ""
	if st.Text == text && (!has || kbEqual(st.Kb, kb)) {
		return nil, &apiErr{code: 400, desc: "Bad Request: message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message"}
	}
	st.Text = text
	if has {
		st.Kb = kb
	}
	s.edits = append(s.edits, Edit{ChatID: chat, MessageID: id, Text: text, Keyboard: kb, HasMarkup: has})
	return map[string]any{"message_id": id, "chat": st.Chat, "date": time.Now().Unix(), "text": text}, nil
}

func kbEqual(a, b [][]Button) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y) || (len(a) == 0 && len(b) == 0)
}

// ---- webhook pushing

func (s *Server) setWebhook(u, secret string) (any, *apiErr) {
	s.stopHook()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hookURL, s.hookSec = u, secret
	if u != "" {
		s.hookStop, s.hookDone = make(chan struct{}), make(chan struct{})
		go s.pushLoop(u, secret, s.hookStop, s.hookDone)
	}
	s.notifyLocked()
	return true, nil
}

func (s *Server) stopHook() {
	s.mu.Lock()
	stop, done := s.hookStop, s.hookDone
	s.hookStop, s.hookDone = nil, nil
	s.mu.Unlock()
	if stop != nil {
		close(stop)
		<-done
	}
}

// pushLoop POSTs pending updates to the webhook one at a time, in order,
// dropping each once it got a 2xx, retrying otherwise.
func (s *Server) pushLoop(u, secret string, stop, done chan struct{}) {
	defer close(done)
	client := &http.Client{Timeout: 10 * time.Second}
	for {
		s.mu.Lock()
		ch := s.changed
		var id int64
		var body json.RawMessage
		if len(s.updIDs) > 0 {
			id, body = s.updIDs[0], s.updates[0]
		}
		s.mu.Unlock()
		if body == nil {
			select {
			case <-stop:
				return
			case <-ch:
				continue
			}
		}
		req, _ := http.NewRequest(http.MethodPost, u, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if secret != "" {
			req.Header.Set("X-Telegram-Bot-Api-Secret-Token", secret)
		}
		status := 0
		if resp, err := client.Do(req); err == nil {
			status = resp.StatusCode
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		s.mu.Lock()
		s.hookLog = append(s.hookLog, WebhookDelivery{UpdateID: id, Status: status})
		if status >= 200 && status < 300 && len(s.updIDs) > 0 && s.updIDs[0] == id {
			s.updIDs, s.updates = s.updIDs[1:], s.updates[1:]
		}
		s.notifyLocked()
		s.mu.Unlock()
		if status < 200 || status >= 300 {
			select {
			case <-stop:
				return
			case <-time.After(s.cfg.WebhookRetry):
			}
		}
	}
}
