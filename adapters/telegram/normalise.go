package telegram

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf16"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"github.com/marlowe-bot/marlowe/core"
)

// Platform is the platform name in scopes and channel keys.
const Platform = "telegram"

// Scope mapping (ARCHITECTURE.md section 5). Chat ids are global in
// Telegram, so the workspace is empty. A chat is the channel "<chat id>"; a
// forum topic is a channel of its own, "<chat id>:<topic id>" (the
// message_thread_id of the topic). Telegram has no threads: Scope.Thread of
// an inbound message is always "", and on an outbound one it names the
// message being answered (sent as a reply to it).

// channelOf names the channel of a chat, or of a forum topic in it.
func channelOf(chatID, topic int64) string {
	if topic > 1 { // 1 is the General topic: the chat itself
		return itoa(chatID) + ":" + itoa(topic)
	}
	return itoa(chatID)
}

// parseChannel splits a channel into chat id and topic (0 = none).
func parseChannel(ch string) (chatID, topic int64, err error) {
	c, t, hasTopic := strings.Cut(ch, ":")
	chatID, err = strconv.ParseInt(c, 10, 64)
	if err != nil || chatID == 0 {
		return 0, 0, fmt.Errorf("telegram: channel %q: want <chat id> or <chat id>:<topic id>", ch)
	}
	if hasTopic {
		topic, err = strconv.ParseInt(t, 10, 64)
		if err != nil || topic <= 1 {
			return 0, 0, fmt.Errorf("telegram: channel %q: bad topic id", ch)
		}
	}
	return chatID, topic, nil
}

// topicOf is the forum topic a message was posted in (0 = none or General).
// In a non-forum supergroup message_thread_id names a reply thread, not a
// topic, so only is_topic_message counts.
func topicOf(m *message) int64 {
	if m.IsTopicMessage && m.MessageThreadID > 1 {
		return m.MessageThreadID
	}
	return 0
}

// utf16Slice returns the text of an entity: Telegram counts offsets and
// lengths in UTF-16 code units, so slicing bytes or runes misplaces every
// entity that follows an emoji or any astral character.
func utf16Slice(units []uint16, off, n int) (string, bool) {
	if off < 0 || n <= 0 || off+n > len(units) {
		return "", false
	}
	return string(utf16.Decode(units[off : off+n])), true
}

// addressees reads mentions from the entities: the bot's own mention
// (a mention entity equal to "@"+its username, a text_mention of its id, or
// a /command@its_username) sets mentionsBot; anyone else's, including a
// /command@other_bot, is listed in Mentions ("@name" for a username, the
// numeric id for a text_mention). The bot is left out of Mentions.
func addressees(text string, ents []tgbotapi.MessageEntity, self identity) (mentions []core.Mention, mentionsBot bool) {
	if len(ents) == 0 {
		return nil, false
	}
	units := utf16.Encode([]rune(text))
	seen := map[string]bool{}
	add := func(id string) {
		if id != "" && !seen[id] {
			seen[id] = true
			mentions = append(mentions, core.Mention{Kind: core.MentionUser, ID: id})
		}
	}
	me := strings.ToLower(self.username)
	for _, e := range ents {
		switch e.Type {
		case "mention":
			s, ok := utf16Slice(units, e.Offset, e.Length)
			if !ok || !strings.HasPrefix(s, "@") || len(s) < 2 {
				continue
			}
			name := strings.ToLower(s[1:]) // usernames are case-insensitive
			if me != "" && name == me {
				mentionsBot = true
			} else {
				add("@" + name)
			}
		case "text_mention":
			if e.User == nil {
				continue
			}
			if self.id != 0 && e.User.ID == self.id {
				mentionsBot = true
			} else {
				add(itoa(e.User.ID))
			}
		case "bot_command":
			s, ok := utf16Slice(units, e.Offset, e.Length)
			if !ok {
				continue
			}
			if _, target, found := strings.Cut(s, "@"); found && target != "" {
				if me != "" && strings.ToLower(target) == me {
					mentionsBot = true
				} else {
					add("@" + strings.ToLower(target))
				}
			}
		}
	}
	return mentions, mentionsBot
}

// cleanText strips the bot's own address from the start of the text:
// "@marlowe_bot remember x" → "remember x", and a leading command
// "/remember@marlowe_bot x" or "/remember x" → "remember x", so Telegram's
// command style reaches the same grammar as a plain message.
func cleanText(text string, ents []tgbotapi.MessageEntity, self identity) string {
	if len(ents) == 0 {
		return text
	}
	units := utf16.Encode([]rune(text))
	me := strings.ToLower(self.username)
	for _, e := range ents {
		if e.Offset != 0 {
			continue
		}
		s, ok := utf16Slice(units, 0, e.Length)
		if !ok {
			return text
		}
		rest := string(utf16.Decode(units[e.Length:]))
		switch e.Type {
		case "mention":
			if me != "" && strings.EqualFold(s, "@"+me) {
				return strings.TrimLeft(rest, " \t\n:,")
			}
		case "text_mention":
			if e.User != nil && e.User.ID == self.id {
				return strings.TrimLeft(rest, " \t\n:,")
			}
		case "bot_command":
			cmd, target, found := strings.Cut(strings.TrimPrefix(s, "/"), "@")
			if found && !strings.EqualFold(target, me) {
				return text // someone else's command: leave it as written
			}
			return strings.TrimSpace(cmd + rest)
		}
		return text
	}
	return text
}

// errSkip marks an update that carries nothing to deliver; its offset is
// confirmed without a delivery.
var errSkip = errors.New("telegram: nothing to deliver")

// normalise builds the core.Event for a new or edited message. It returns
// errSkip for what has no author to answer (channel posts).
func (a *Adapter) normalise(m *message, edited bool) (core.Event, error) {
	self := a.identity()
	var vis core.Visibility
	switch m.Chat.Type {
	case "private":
		vis = core.DM
	case "group", "supergroup":
		vis = a.groupVisibility(m.Chat.ID)
	default: // "channel": broadcasts have no people writing
		return core.Event{}, errSkip
	}
	if m.From == nil || m.From.ID == 0 {
		return core.Event{}, errSkip
	}
	ev := core.Event{
		Scope: core.Scope{
			Platform: Platform,
			Channel:  channelOf(m.Chat.ID, topicOf(m)),
		},
		Visibility: vis,
		MessageID:  itoa(m.MessageID),
		Author: core.Person{
			ID:   itoa(m.From.ID),
			Name: personName(m.From),
			// Anonymous admins and linked channels post as bots
			// (GroupAnonymousBot, sender_chat); messages sent via an
			// inline bot are that bot's words.
			IsBot: m.From.IsBot || m.SenderChat != nil || m.ViaBot != nil,
		},
		At: time.Unix(m.Date, 0).UTC(),
	}
	text, ents := m.Text, m.Entities
	if text == "" && m.Caption != "" {
		text, ents = m.Caption, m.CaptionEntities
	}
	ev.Attachments = attachmentsOf(m, a.attachMax())
	switch {
	case edited:
		ev.Subtype = "edit"
	case m.isService():
		ev.Subtype = "service"
	case text == "" && len(ev.Attachments) == 0:
		// A sticker, a location, a dice...: nothing a person said. A
		// photo, file or voice note without a caption is a post like any
		// other (an attachment neither routes nor silences).
		ev.Subtype = "media"
	}
	ev.Mentions, ev.MentionsBot = addressees(text, ents, self)
	ev.Text = cleanText(text, ents, self)
	if r := m.ReplyToMessage; r != nil && !isTopicRoot(m, r) {
		ev.ReplyTo = itoa(r.MessageID)
		ev.ReplyToBot = r.From != nil && self.id != 0 && r.From.ID == self.id
	}
	return ev, nil
}

// isTopicRoot: in a forum topic, a message that replies to nothing still
// carries reply_to_message = the topic's creation notice. That is not a
// reply (and not a reply to the bot, even when the bot created the topic).
func isTopicRoot(m, r *message) bool {
	return m.IsTopicMessage && (r.MessageID == m.MessageThreadID || len(r.ForumTopicCreated) > 0)
}

func personName(u *tgbotapi.User) string {
	if u.UserName != "" {
		return u.UserName
	}
	return strings.TrimSpace(u.FirstName + " " + u.LastName)
}

// groupVisibility: a group or supergroup is public unless the operator
// declared it private (MARLOWE_TELEGRAM_PRIVATE_CHATS).
func (a *Adapter) groupVisibility(chatID int64) core.Visibility {
	if a.private[chatID] {
		return core.Private
	}
	return core.Public
}
