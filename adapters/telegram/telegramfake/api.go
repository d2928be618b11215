package telegramfake

// The Bot API methods the fake answers.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf16"
	"unicode/utf8"
)

type apiErr struct {
	code  int
	desc  string
	retry int
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, "/file/") {
		s.serveFile(w, r)
		return
	}
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
	case method == "sendDocument":
		if e = s.limited(method); e == nil {
			result, e = s.sendDocument(r, form)
		} else {
			_, _ = io.Copy(io.Discard, r.Body) // refused unread, the client may see a reset
		}
	default:
		result, e = s.dispatch(r.Context(), method, form)
	}
	s.mu.Lock()
	lost := s.lose[method] > 0 && e == nil
	if lost {
		s.lose[method]--
	}
	held := !lost && s.hold[method] > 0 && e == nil
	if held {
		s.hold[method]--
		s.calls = append(s.calls, Call{Method: method, Params: form, Status: 0, At: s.cfg.Now()})
		s.notifyLocked()
	}
	s.mu.Unlock()
	if held {
		s.holdUntilGone(r)
		return
	}
	if lost {
		s.mu.Lock()
		s.calls = append(s.calls, Call{Method: method, Params: form, Status: 0, At: s.cfg.Now()})
		s.notifyLocked()
		s.mu.Unlock()
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				_ = conn.Close()
				return
			}
		}
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
	s.calls = append(s.calls, Call{Method: method, Params: form, Status: status, At: s.cfg.Now()})
	s.notifyLocked()
	s.mu.Unlock()
}

// limited is the 429 RateLimit scripted for method's next call, if any.
func (s *Server) limited(method string) *apiErr {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.limits[method]
	if len(q) == 0 {
		return nil
	}
	s.limits[method] = q[1:]
	sec := max(int(q[0]/time.Second), 1)
	return &apiErr{code: 429, desc: fmt.Sprintf("Too Many Requests: retry after %d", sec), retry: sec}
}

func (s *Server) dispatch(ctx context.Context, method string, f url.Values) (any, *apiErr) {
	if e := s.limited(method); e != nil {
		return nil, e
	}
	switch method {
	case "getMe":
		return map[string]any{"id": s.cfg.BotID, "is_bot": true, "first_name": s.cfg.FirstName,
			"username": s.cfg.Username, "can_join_groups": true,
			"can_read_all_group_messages": s.cfg.ReadAllGroupMessages, "supports_inline_queries": false}, nil
	case "getUpdates":
		return s.getUpdates(ctx, f)
	case "getFile":
		return s.getFile(f)
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
		return s.sendChatAction(f)
	case "setMyCommands":
		return s.setMyCommands(f)
	case "getMyCommands":
		s.mu.Lock()
		defer s.mu.Unlock()
		return append([]BotCommand{}, s.commands[scopeType(f.Get("scope"))]...), nil
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
		if ms, ok := s.members[atoi(f.Get("chat_id"))]; ok && !ms[uid] {
			st = "left"
		}
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

// chatActions are the actions sendChatAction accepts.
var chatActions = map[string]bool{"typing": true, "upload_photo": true, "record_video": true, "upload_video": true,
	"record_voice": true, "upload_voice": true, "upload_document": true, "choose_sticker": true,
	"find_location": true, "record_video_note": true, "upload_video_note": true}

func (s *Server) sendChatAction(f url.Values) (any, *apiErr) {
	chat := atoi(f.Get("chat_id"))
	if chat == 0 {
		return nil, &apiErr{code: 400, desc: "Bad Request: chat not found"}
	}
	if !chatActions[f.Get("action")] {
		return nil, &apiErr{code: 400, desc: "Bad Request: wrong parameter action in request"}
	}
	topic := atoi(f.Get("message_thread_id"))
	if f.Has("message_thread_id") && topic <= 1 {
		return nil, &apiErr{code: 400, desc: "Bad Request: message thread not found"}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.actions = append(s.actions, ChatAction{ChatID: chat, Topic: topic, Action: f.Get("action"), At: time.Now()})
	return true, nil
}

// commandName is what Telegram accepts as a command name.
var commandName = regexp.MustCompile(`^[a-z0-9_]{1,32}$`)

// scopeType reads a BotCommandScope's type ("default" when absent).
func scopeType(raw string) string {
	var sc struct {
		Type string `json:"type"`
	}
	if raw == "" || json.Unmarshal([]byte(raw), &sc) != nil || sc.Type == "" {
		return "default"
	}
	return sc.Type
}

// setMyCommands keeps the menu per scope type, refusing what Telegram
// refuses: a bad name, a description outside 1..256 characters, more
// than 100 commands, or a scope it does not know.
func (s *Server) setMyCommands(f url.Values) (any, *apiErr) {
	var cmds []BotCommand
	if err := json.Unmarshal([]byte(f.Get("commands")), &cmds); err != nil {
		return nil, &apiErr{code: 400, desc: "Bad Request: can't parse commands JSON object"}
	}
	if len(cmds) > 100 {
		return nil, &apiErr{code: 400, desc: "Bad Request: too many commands specified"}
	}
	for _, c := range cmds {
		if !commandName.MatchString(c.Command) {
			return nil, &apiErr{code: 400, desc: "Bad Request: BOT_COMMAND_INVALID"}
		}
		if n := utf8.RuneCountInString(c.Description); n < 1 || n > 256 {
			return nil, &apiErr{code: 400, desc: "Bad Request: BOT_COMMAND_DESCRIPTION_INVALID"}
		}
	}
	st := scopeType(f.Get("scope"))
	switch st {
	case "default", "all_private_chats", "all_group_chats", "all_chat_administrators":
	default:
		return nil, &apiErr{code: 400, desc: "Bad Request: unsupported scope " + st}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.commands[st] = cmds
	return true, nil
}
