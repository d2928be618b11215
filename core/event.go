package core

import "time"

// Visibility is who can read a channel; the intent filter treats private
// channels more strictly than public ones.
type Visibility string

const (
	Public  Visibility = "public"
	Private Visibility = "private"
	DM      Visibility = "dm"
)

// Person is a message author as verified by the platform adapter.
type Person struct {
	ID    string `json:"id"`
	Name  string `json:"name,omitempty"`
	IsBot bool   `json:"is_bot,omitempty"`
}

// MentionKind distinguishes user, group and broadcast mentions.
type MentionKind string

const (
	MentionUser      MentionKind = "user"
	MentionGroup     MentionKind = "group"
	MentionBroadcast MentionKind = "broadcast" // @here, @channel, @everyone
)

// Mention is one addressee of a message, resolved by id, never by name.
type Mention struct {
	Kind MentionKind `json:"kind"`
	ID   string      `json:"id"`
}

// Event is a person's message, normalised by an adapter. Everything here is
// what the platform verified; nothing is inferred from the text.
type Event struct {
	Scope       Scope      `json:"scope"`
	Visibility  Visibility `json:"visibility"`
	MessageID   string     `json:"message_id"`
	Author      Person     `json:"author"`
	Subtype     string     `json:"subtype,omitempty"`
	Text        string     `json:"text"`
	Mentions    []Mention  `json:"mentions,omitempty"`
	MentionsBot bool       `json:"mentions_bot,omitempty"`
	ReplyTo     string     `json:"reply_to,omitempty"`
	ReplyToBot  bool       `json:"reply_to_bot,omitempty"`
	At          time.Time  `json:"at"`
	// Attachments are the files shared with the message (declared, not
	// fetched). They neither route nor silence a message: the intent
	// filter decides on the rest of the event alone.
	Attachments []Attachment `json:"attachments,omitempty"`
}

// CardClick is a button press on a card, as verified by the adapter.
type CardClick struct {
	Scope  Scope     `json:"scope"`
	Card   string    `json:"card"`
	Action string    `json:"action"`
	Token  string    `json:"token"`
	By     Person    `json:"by"`
	At     time.Time `json:"at"`
}
