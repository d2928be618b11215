package attachments

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"

	"github.com/marlowe-bot/marlowe/core"
)

// Configuration names and defaults.
const (
	EnvMaxBytes       = "MARLOWE_ATTACHMENT_MAX_BYTES"
	EnvMaxCount       = "MARLOWE_ATTACHMENT_MAX_COUNT"
	EnvVision         = "MARLOWE_MODEL_VISION"
	EnvTranscribeURL  = "MARLOWE_TRANSCRIBE_BASE_URL"
	EnvTranscribeMod  = "MARLOWE_TRANSCRIBE_MODEL"
	EnvTranscribeKey  = "MARLOWE_TRANSCRIBE_API_KEY"
	DefaultMaxBytes   = 20 << 20
	DefaultMaxCount   = 8
	DefaultMaxSide    = 1568
	DefaultMaxPixels  = 25_000_000 // 25 MP: a 100 MB RGBA decode at most
	DefaultMaxText    = 32 << 10   // bytes of one file's text inlined
	DefaultMaxPDFPage = 50
)

// Vision is whether images go to the model as pixels.
type Vision string

const (
	VisionAuto Vision = "auto" // as the model's probe says (default)
	VisionOn   Vision = "on"
	VisionOff  Vision = "off"
)

// Config bounds what the reader does.
type Config struct {
	MaxBytes  int64 // per file, fetched
	MaxCount  int   // per message
	MaxSide   int   // image long side, px
	MaxPixels int   // image width×height past which it is not decoded
	MaxText   int   // bytes of extracted text per file
	MaxPages  int   // PDF pages read
	// Images says whether images may go to the model as pixels; false:
	// the person is told the model cannot see images.
	Images bool
	// Transcriber, nil: voice and audio are reported untranscribed.
	Transcriber Transcriber
	Log         *slog.Logger
}

// ConfigFromEnv reads the limits (a bad value is an error naming it).
func ConfigFromEnv(getenv func(string) string) (Config, Vision, error) {
	c := Config{MaxBytes: DefaultMaxBytes, MaxCount: DefaultMaxCount}
	if v := strings.TrimSpace(getenv(EnvMaxBytes)); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			return c, "", fmt.Errorf("%s=%q: want a positive number of bytes", EnvMaxBytes, v)
		}
		c.MaxBytes = n
	}
	if v := strings.TrimSpace(getenv(EnvMaxCount)); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return c, "", fmt.Errorf("%s=%q: want a positive number of attachments", EnvMaxCount, v)
		}
		c.MaxCount = n
	}
	vis := Vision(strings.ToLower(strings.TrimSpace(getenv(EnvVision))))
	switch vis {
	case "":
		vis = VisionAuto
	case VisionAuto, VisionOn, VisionOff:
	default:
		return c, "", fmt.Errorf("%s=%q: want auto, on or off", EnvVision, vis)
	}
	base, model := strings.TrimSpace(getenv(EnvTranscribeURL)), strings.TrimSpace(getenv(EnvTranscribeMod))
	switch {
	case base != "" && model != "":
		c.Transcriber = &Whisper{BaseURL: base, Model: model, APIKey: getenv(EnvTranscribeKey)}
	case base != "" || model != "":
		return c, "", fmt.Errorf("%s and %s go together: set both or neither", EnvTranscribeURL, EnvTranscribeMod)
	}
	return c, vis, nil
}

// Reader implements core.AttachmentReader.
type Reader struct{ cfg Config }

// New returns a reader with cfg's zero values replaced by the defaults.
func New(cfg Config) *Reader {
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = DefaultMaxBytes
	}
	if cfg.MaxCount <= 0 {
		cfg.MaxCount = DefaultMaxCount
	}
	if cfg.MaxSide <= 0 {
		cfg.MaxSide = DefaultMaxSide
	}
	if cfg.MaxPixels <= 0 {
		cfg.MaxPixels = DefaultMaxPixels
	}
	if cfg.MaxText <= 0 {
		cfg.MaxText = DefaultMaxText
	}
	if cfg.MaxPages <= 0 {
		cfg.MaxPages = DefaultMaxPDFPage
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Reader{cfg: cfg}
}

var _ core.AttachmentReader = (*Reader)(nil)

// ReadAttachments reads up to MaxCount attachments, in order; the rest,
// and every file that cannot be read, come back as SeenUnreadable with a
// note saying why. It never fails as a whole.
func (r *Reader) ReadAttachments(ctx context.Context, fetch core.AttachmentFetcher, atts []core.Attachment) []core.AttachmentSeen {
	out := make([]core.AttachmentSeen, 0, len(atts))
	for i, a := range atts {
		if i >= r.cfg.MaxCount {
			out = append(out, unreadable(a, fmt.Sprintf("not read: at most %d attachments are read per message (%s)", r.cfg.MaxCount, EnvMaxCount)))
			continue
		}
		out = append(out, r.readOne(ctx, fetch, a))
	}
	return out
}

func unreadable(a core.Attachment, note string) core.AttachmentSeen {
	return core.AttachmentSeen{ID: a.ID, Name: a.Name, Type: a.Type, Kind: core.SeenUnreadable, Note: note}
}

func (r *Reader) readOne(ctx context.Context, fetch core.AttachmentFetcher, a core.Attachment) core.AttachmentSeen {
	if fetch == nil {
		return unreadable(a, "not read: this platform's files cannot be downloaded by Marlowe")
	}
	if a.Size > r.cfg.MaxBytes {
		return unreadable(a, fmt.Sprintf("not read: %s is past the %s limit (%s)", human(a.Size), human(r.cfg.MaxBytes), EnvMaxBytes))
	}
	b, err := fetch.FetchAttachment(ctx, a, r.cfg.MaxBytes)
	switch {
	case errors.Is(err, core.ErrAttachmentTooLarge):
		return unreadable(a, fmt.Sprintf("not read: the file is past the %s limit (%s)", human(r.cfg.MaxBytes), EnvMaxBytes))
	case errors.Is(err, core.ErrAttachmentHost):
		return unreadable(a, "not read: its address is not on the platform's own file hosts")
	case err != nil:
		if ctx.Err() != nil {
			return unreadable(a, "not read: the download was interrupted")
		}
		r.cfg.Log.Warn("attachment download failed", "attachment", a.ID, "error", err)
		return unreadable(a, "not read: the download failed (the bot may lack permission to read files, or the file is gone)")
	}
	seen := core.AttachmentSeen{ID: a.ID, Name: a.Name, Size: int64(len(b))}
	if len(b) == 0 {
		seen.Kind, seen.Note = core.SeenUnreadable, "the file is empty (0 bytes)"
		return seen
	}
	mt, cl := sniff(b)
	seen.Type = mt
	seen = r.convert(ctx, seen, a, b, cl)
	if a.Type != "" && declaredMismatch(a.Type, mt) {
		// The name or declared type lied: the content decides.
		seen.Note = joinNote(seen.Note, fmt.Sprintf("declared as %s but its content is %s", a.Type, mt))
	}
	return seen
}

func (r *Reader) convert(ctx context.Context, seen core.AttachmentSeen, a core.Attachment, b []byte, cl class) core.AttachmentSeen {
	switch cl {
	case classImage:
		return r.image(seen, b)
	case classText:
		seen.Kind = core.SeenText
		seen.Text, seen.Note = boundText(string(b), r.cfg.MaxText)
	case classPDF:
		return r.pdf(seen, b)
	case classAudio:
		return r.audio(ctx, seen, a, b)
	case classVideo:
		seen.Kind, seen.Note = core.SeenUnreadable, "not read: video is not supported (only its existence is known)"
	default:
		seen.Kind, seen.Note = core.SeenUnreadable, fmt.Sprintf("not read: unsupported type %s (sniffed from its content)", seen.Type)
	}
	seen.Tokens = len(seen.Text) / 4
	return seen
}

func (r *Reader) image(seen core.AttachmentSeen, b []byte) core.AttachmentSeen {
	if !r.cfg.Images {
		seen.Kind, seen.Note = core.SeenUnreadable, "not seen: the model in use cannot see images ("+EnvVision+")"
		return seen
	}
	px, img, err := prepareImage(b, r.cfg.MaxSide, r.cfg.MaxPixels)
	if err != nil {
		seen.Kind = core.SeenUnreadable
		if errors.Is(err, errBomb) {
			seen.Note = "not read: " + err.Error()
		} else {
			seen.Note = "not read: the image could not be decoded"
		}
		return seen
	}
	seen.Kind, seen.Image, seen.Pixels = core.SeenImage, img, px
	if img.Width != img.OrigWidth || img.Height != img.OrigHeight {
		seen.Note = fmt.Sprintf("scaled from %dx%d to %dx%d", img.OrigWidth, img.OrigHeight, img.Width, img.Height)
	}
	// Anthropic's estimate: width×height/750 tokens.
	seen.Tokens = img.Width * img.Height / 750
	return seen
}

func (r *Reader) pdf(seen core.AttachmentSeen, b []byte) core.AttachmentSeen {
	text, pages, read, err := pdfText(b, r.cfg.MaxPages, r.cfg.MaxText*4)
	seen.Kind = core.SeenPDF
	if err != nil {
		seen.Kind, seen.Note = core.SeenUnreadable, "not read: the PDF could not be parsed"
		return seen
	}
	if strings.TrimSpace(text) == "" {
		seen.Kind = core.SeenUnreadable
		seen.Note = fmt.Sprintf("the PDF (%d pages) has no text layer: it is probably a scan, and Marlowe does not read scanned pages", pages)
		return seen
	}
	seen.Text, seen.Note = boundText(text, r.cfg.MaxText)
	if read < pages {
		seen.Note = joinNote(fmt.Sprintf("only the first %d of %d pages were read", read, pages), seen.Note)
	}
	seen.Tokens = len(seen.Text) / 4
	return seen
}

func (r *Reader) audio(ctx context.Context, seen core.AttachmentSeen, a core.Attachment, b []byte) core.AttachmentSeen {
	if r.cfg.Transcriber == nil {
		seen.Kind, seen.Note = core.SeenUnreadable, "not transcribed: no transcriber is configured ("+EnvTranscribeURL+", "+EnvTranscribeMod+")"
		return seen
	}
	name := a.Name
	if name == "" {
		name = "audio"
	}
	text, err := r.cfg.Transcriber.Transcribe(ctx, name, seen.Type, b)
	if err != nil {
		r.cfg.Log.Warn("transcription failed", "attachment", a.ID, "error", err)
		seen.Kind, seen.Note = core.SeenUnreadable, "not transcribed: the transcriber failed"
		return seen
	}
	seen.Kind = core.SeenTranscript
	seen.Text, seen.Note = boundText(text, r.cfg.MaxText)
	if seen.Text == "" {
		seen.Note = joinNote(seen.Note, "the transcript is empty (no speech heard)")
	}
	seen.Tokens = len(seen.Text) / 4
	return seen
}

func declaredMismatch(declared, sniffed string) bool {
	d, _, _ := strings.Cut(declared, ";")
	dm, _, _ := strings.Cut(d, "/")
	sm, _, _ := strings.Cut(sniffed, "/")
	return !strings.EqualFold(dm, sm) && !(sm == "text" && (strings.Contains(d, "json") || strings.Contains(d, "yaml") || strings.Contains(d, "csv") || strings.Contains(d, "xml")))
}

func joinNote(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "; " + b
}

func human(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}
