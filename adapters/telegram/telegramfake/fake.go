// Package telegramfake is a local, in-process fake of the parts of the
// Telegram Bot API that Marlowe uses: getMe, getUpdates (offset
// confirmation and long-poll semantics, 409 while a webhook is set),
// sendMessage (message_thread_id, reply_parameters, inline keyboards),
// editMessageText, answerCallbackQuery, setMessageReaction, sendChatAction (the action and
// message_thread_id recorded), setMyCommands / getMyCommands (per scope type),
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
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strconv"
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
	// Now is the clock each Call is stamped with (default time.Now): a
	// test gives the adapter's injected clock, so PeakPerSecond counts as
	// the pacer does.
	Now func() time.Time
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
	// Media are fields merged into the message as given: "photo",
	// "document", "voice", ... with file ids from HostFile.
	Media map[string]any
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

// ChatAction is one accepted sendChatAction.
type ChatAction struct {
	ChatID int64
	Topic  int64 // message_thread_id sent (0 = none)
	Action string
	At     time.Time
}

// BotCommand is one entry of a command menu (setMyCommands).
type BotCommand struct {
	Command     string `json:"command"`
	Description string `json:"description"`
}

// Call is one Bot API request as the fake answered it.
type Call struct {
	Method string
	Params url.Values
	Status int
	At     time.Time // when the fake answered it (Config.Now)
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
	lose     map[string]int // method → responses still to lose
	hold     map[string]int // method → responses still to hold back
	changed  chan struct{}
	closed   bool
	nextUpd  int64
	nextMsg  map[int64]int64
	updates  []json.RawMessage // unconfirmed, in order
	updIDs   []int64
	msgs     map[[2]int64]*stored
	sent     []Sent
	docs     []Document  // sendDocument uploads (files.go)
	hosted   hostedFiles // files people shared (hosted.go)
	edits    []Edit
	answers  []Answer
	reacts   []Reaction
	actions  []ChatAction
	commands map[string][]BotCommand // scope type → menu
	calls    []Call
	limits   map[string][]time.Duration
	admins   map[int64][]int64        // chat → admin ids (first is the creator)
	members  map[int64]map[int64]bool // chat → member ids, for chats given SetMembers (others: everyone is a member)
	cbs      map[string]bool          // issued callback query ids
	polling  int                      // getUpdates calls in flight
	conflict int                      // getUpdates refused because another was in flight
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
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.WebhookRetry <= 0 {
		cfg.WebhookRetry = 100 * time.Millisecond
	}
	s := &Server{
		cfg: cfg, changed: make(chan struct{}), nextUpd: 1000,
		nextMsg: map[int64]int64{}, msgs: map[[2]int64]*stored{},
		limits: map[string][]time.Duration{}, commands: map[string][]BotCommand{}, admins: map[int64][]int64{}, members: map[int64]map[int64]bool{}, cbs: map[string]bool{},
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

// LoseResponses performs the next n calls of method but cuts the
// connection instead of answering, so the client cannot tell whether they
// happened. n = 0 stops losing.
func (s *Server) LoseResponses(method string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lose == nil {
		s.lose = map[string]int{}
	}
	s.lose[method] = n
}

// HoldResponses performs the next n calls of method but never answers
// them: each waits until its client goes away (a process killed mid-call)
// or the fake closes. n = 0 stops holding.
func (s *Server) HoldResponses(method string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hold == nil {
		s.hold = map[string]int{}
	}
	s.hold[method] = n
}

// holdUntilGone keeps a held call unanswered until its client goes away
// or the fake closes. The body is read to its end first: only then does
// the HTTP server watch the connection and cancel the request's context
// when the client dies (a multipart reader may stop short of the end).
func (s *Server) holdUntilGone(r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	for {
		s.mu.Lock()
		ch, closed := s.changed, s.closed
		s.mu.Unlock()
		if closed {
			return
		}
		select {
		case <-r.Context().Done():
			return
		case <-ch:
		}
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

// SetMembers lists chat's members (its admins count too): getChatMember
// answers "left" for anyone else. Chats never given a list count everyone.
func (s *Server) SetMembers(chat int64, users ...int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.members[chat] = map[int64]bool{}
	for _, u := range users {
		s.members[chat][u] = true
	}
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
	for k, v := range in.Media {
		m[k] = v
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

// ChatActions returns every accepted sendChatAction, in order.
func (s *Server) ChatActions() []ChatAction {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]ChatAction(nil), s.actions...)
}

// Commands returns the command menu set for a scope type ("default",
// "all_private_chats", "all_group_chats", ...), nil if none was set.
func (s *Server) Commands(scope string) []BotCommand {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]BotCommand(nil), s.commands[scope]...)
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

// PeakPerSecond is the most calls (every method, any status) the fake
// answered within any one second: what Telegram's bot-wide limit counts.
func (s *Server) PeakPerSecond() int {
	s.mu.Lock()
	at := make([]time.Time, 0, len(s.calls))
	for _, c := range s.calls {
		at = append(at, c.At)
	}
	s.mu.Unlock()
	sort.Slice(at, func(i, j int) bool { return at[i].Before(at[j]) })
	peak, lo := 0, 0
	for hi := range at {
		for !at[hi].Before(at[lo].Add(time.Second)) {
			lo++
		}
		peak = max(peak, hi-lo+1)
	}
	return peak
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
