package core

import (
	"context"
	"errors"
)

// Attachment is a file a person shared with a message, as the platform
// declared it: never its bytes. Name and Type are the sender's claims (a
// file named report.pdf may be anything); what a file is gets sniffed from
// its content once it is fetched.
type Attachment struct {
	// ID is the platform's id of the file (Slack F…, a Discord attachment
	// snowflake, a Telegram file_unique_id or file_id).
	ID   string `json:"id"`
	Name string `json:"name,omitempty"`
	// Type is the declared MIME type ("image/png"), "" when the platform
	// declares none.
	Type string `json:"type,omitempty"`
	// Kind is the platform's own class of the file when it has one
	// ("photo", "voice", "audio", "video_note", "document"), "" otherwise.
	Kind string `json:"kind,omitempty"`
	// Size is the declared size in bytes (0: not declared).
	Size int64 `json:"size,omitempty"`
	// Ref is how the surface fetches it: Slack's url_private_download, a
	// Telegram file_id, a Discord CDN URL. It comes from the platform's
	// payload, never from message text; the surface still fetches only
	// from its own platform's hosts.
	Ref string `json:"ref"`
	// Width and Height are declared pixel dimensions of an image (0: none).
	Width  int `json:"width,omitempty"`
	Height int `json:"height,omitempty"`
}

// AttachmentFetcher is an optional Surface capability: the surface
// downloads an attachment with the platform's own authentication (Slack's
// bot token, Telegram getFile, Discord's CDN), from the platform's hosts
// only, streaming at most max bytes within its timeout. A file past max is
// ErrAttachmentTooLarge, not a truncated read.
type AttachmentFetcher interface {
	FetchAttachment(ctx context.Context, a Attachment, max int64) ([]byte, error)
}

// ErrAttachmentTooLarge says a file is larger than the cap it was fetched
// under.
var ErrAttachmentTooLarge = errors.New("attachment is larger than the size cap")

// ErrAttachmentHost says an attachment's reference points outside the
// platform's own hosts; it is never fetched.
var ErrAttachmentHost = errors.New("attachment reference is not on the platform's hosts")
