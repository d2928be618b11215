package telegram

import (
	"encoding/json"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"
)

// The SDK (v5.5.1) predates forum topics: its Message has no
// message_thread_id or is_topic_message, and decoding into it would lose
// them. Updates are decoded into these types instead; they reuse the SDK's
// User, Chat and MessageEntity.

// update is one Bot API Update; only the kinds Marlowe uses are kept.
type update struct {
	UpdateID          int64          `json:"update_id"`
	Message           *message       `json:"message,omitempty"`
	EditedMessage     *message       `json:"edited_message,omitempty"`
	ChannelPost       *message       `json:"channel_post,omitempty"`
	EditedChannelPost *message       `json:"edited_channel_post,omitempty"`
	CallbackQuery     *callbackQuery `json:"callback_query,omitempty"`
}

// message is a Bot API Message with the forum fields.
type message struct {
	MessageID       int64                    `json:"message_id"`
	MessageThreadID int64                    `json:"message_thread_id,omitempty"`
	IsTopicMessage  bool                     `json:"is_topic_message,omitempty"`
	From            *tgbotapi.User           `json:"from,omitempty"`
	SenderChat      *tgbotapi.Chat           `json:"sender_chat,omitempty"`
	Chat            tgbotapi.Chat            `json:"chat"`
	Date            int64                    `json:"date"`
	EditDate        int64                    `json:"edit_date,omitempty"`
	ReplyToMessage  *message                 `json:"reply_to_message,omitempty"`
	ViaBot          *tgbotapi.User           `json:"via_bot,omitempty"`
	Text            string                   `json:"text,omitempty"`
	Entities        []tgbotapi.MessageEntity `json:"entities,omitempty"`
	Caption         string                   `json:"caption,omitempty"`
	CaptionEntities []tgbotapi.MessageEntity `json:"caption_entities,omitempty"`

	// Files a person shared (attachments.go).
	Photo     []photoSize `json:"photo,omitempty"`
	Document  *fileRef    `json:"document,omitempty"`
	Voice     *fileRef    `json:"voice,omitempty"`
	Audio     *fileRef    `json:"audio,omitempty"`
	VideoNote *fileRef    `json:"video_note,omitempty"`
	Video     *fileRef    `json:"video,omitempty"`

	// Service messages: any of these makes the message a notice, not a post.
	NewChatMembers     []tgbotapi.User `json:"new_chat_members,omitempty"`
	LeftChatMember     *tgbotapi.User  `json:"left_chat_member,omitempty"`
	NewChatTitle       string          `json:"new_chat_title,omitempty"`
	PinnedMessage      json.RawMessage `json:"pinned_message,omitempty"`
	ForumTopicCreated  json.RawMessage `json:"forum_topic_created,omitempty"`
	ForumTopicEdited   json.RawMessage `json:"forum_topic_edited,omitempty"`
	ForumTopicClosed   json.RawMessage `json:"forum_topic_closed,omitempty"`
	ForumTopicReopened json.RawMessage `json:"forum_topic_reopened,omitempty"`
	GroupChatCreated   bool            `json:"group_chat_created,omitempty"`
	SupergroupCreated  bool            `json:"supergroup_chat_created,omitempty"`
	MigrateToChatID    int64           `json:"migrate_to_chat_id,omitempty"`
	MigrateFromChatID  int64           `json:"migrate_from_chat_id,omitempty"`
}

func (m *message) isService() bool {
	return len(m.NewChatMembers) > 0 || m.LeftChatMember != nil || m.NewChatTitle != "" ||
		len(m.PinnedMessage) > 0 || len(m.ForumTopicCreated) > 0 || len(m.ForumTopicEdited) > 0 ||
		len(m.ForumTopicClosed) > 0 || len(m.ForumTopicReopened) > 0 || m.GroupChatCreated ||
		m.SupergroupCreated || m.MigrateToChatID != 0 || m.MigrateFromChatID != 0
}

// callbackQuery is a button press on an inline keyboard.
type callbackQuery struct {
	ID              string        `json:"id"`
	From            tgbotapi.User `json:"from"`
	Message         *message      `json:"message,omitempty"`
	InlineMessageID string        `json:"inline_message_id,omitempty"`
	ChatInstance    string        `json:"chat_instance,omitempty"`
	Data            string        `json:"data,omitempty"`
}

// sentMessage is the part of a sent or edited Message we read back.
type sentMessage struct {
	MessageID       int64         `json:"message_id"`
	MessageThreadID int64         `json:"message_thread_id,omitempty"`
	Chat            tgbotapi.Chat `json:"chat"`
	Date            int64         `json:"date"`
}

// chatMember is a ChatMember as getChatAdministrators returns it.
type chatMember struct {
	Status string        `json:"status"`
	User   tgbotapi.User `json:"user"`
}

// Outbound request bodies the SDK cannot express.

type inlineButton struct {
	Text         string `json:"text"`
	CallbackData string `json:"callback_data"`
}

type inlineKeyboard struct {
	InlineKeyboard [][]inlineButton `json:"inline_keyboard"`
}

type replyParameters struct {
	MessageID                int64 `json:"message_id"`
	AllowSendingWithoutReply bool  `json:"allow_sending_without_reply"`
}

type reactionType struct {
	Type  string `json:"type"`
	Emoji string `json:"emoji"`
}
