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

// AttachmentReader turns a message's attachments into what a model can
// take: images as pixels, documents as text, voice as a transcript, and
// for everything else a note of what it was and why it could not be read.
// The engine calls it without knowing any file format; fetch is the
// surface's AttachmentFetcher, nil when the surface cannot download files.
type AttachmentReader interface {
	ReadAttachments(ctx context.Context, fetch AttachmentFetcher, atts []Attachment) []AttachmentSeen
}

// Attachment kinds as the model sees them (AttachmentSeen.Kind).
const (
	SeenImage      = "image"      // pixels, in Image and Pixels
	SeenText       = "text"       // a text-like file, inlined in Text
	SeenPDF        = "pdf"        // a PDF's text layer, in Text
	SeenTranscript = "transcript" // voice or audio, transcribed into Text
	SeenUnreadable = "unreadable" // too big, unknown type, unreachable...: Note says why
)

// AttachmentSeen is what the model saw of one attachment: the run's
// observation, journaled so a replay or a resumed run never downloads or
// transcribes again. Text is untrusted content (a target written in a file
// is not what the person typed); Note is always shown to the person too
// when the file could not be fully read.
type AttachmentSeen struct {
	ID   string `json:"id"`
	Name string `json:"name,omitempty"`
	// Type is the sniffed MIME type (never the declared one alone).
	Type string `json:"type,omitempty"`
	Kind string `json:"kind"`
	// Size is the bytes fetched (0 when nothing was).
	Size int64  `json:"size,omitempty"`
	Text string `json:"text,omitempty"`
	// Note says what was cut or why nothing could be read.
	Note  string     `json:"note,omitempty"`
	Image *ImageSeen `json:"image,omitempty"`
	// Tokens is the estimated model input this attachment costs.
	Tokens int `json:"tokens,omitempty"`
	// Pixels are the re-encoded image bytes (Image.Type): never journaled;
	// the engine keeps them in the blob store under Image.SHA256.
	Pixels []byte `json:"-"`
}

// ImageSeen identifies the image the model was given.
type ImageSeen struct {
	SHA256 string `json:"sha256"` // of the re-encoded bytes
	Type   string `json:"type"`   // image/jpeg | image/png
	Width  int    `json:"width"`
	Height int    `json:"height"`
	// OrigWidth and OrigHeight are the file's own dimensions.
	OrigWidth  int `json:"orig_width,omitempty"`
	OrigHeight int `json:"orig_height,omitempty"`
}

// BlobStore keeps content-addressed bytes (the images a model was shown),
// so a resumed run shows them again without downloading. The journal
// holds only the hash. Erasure deletes by hash.
type BlobStore interface {
	PutBlob(ctx context.Context, sha256hex string, data []byte) error
	// GetBlob returns ErrBlobNotFound for a hash it does not hold.
	GetBlob(ctx context.Context, sha256hex string) ([]byte, error)
	DeleteBlob(ctx context.Context, sha256hex string) error
}

// ErrBlobNotFound: no blob under that hash (never stored, or erased).
var ErrBlobNotFound = errors.New("blob not found")

// FileSharer is what a tool's surface offers when the platform takes
// files (FileUploader): the file is posted in the run's own thread,
// keyed like a post, so a run resumed after a crash never uploads it
// twice; an upload whose outcome a crash left unknown is reported in
// doubt (ErrShareInDoubt), never repeated.
type FileSharer interface {
	ShareFile(ctx context.Context, f File) (MessageRef, error)
}

// ErrShareInDoubt: an earlier process began this upload and died before
// recording its outcome; it is not repeated.
var ErrShareInDoubt = errors.New("the upload may already have been made before a restart; it was not repeated")

// ErrNoFileUpload: the platform of the run takes no files from Marlowe.
var ErrNoFileUpload = errors.New("this platform does not take files from Marlowe")
