package telegram

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/internal/filefetch"
)

// photoSize is one of the sizes Telegram keeps of a photo.
type photoSize struct {
	FileID       string `json:"file_id"`
	FileUniqueID string `json:"file_unique_id"`
	FileSize     int64  `json:"file_size,omitempty"`
	Width        int    `json:"width"`
	Height       int    `json:"height"`
}

// fileRef is a Document, Voice, Audio, Video or VideoNote: the fields
// Marlowe reads are common to all of them.
type fileRef struct {
	FileID       string `json:"file_id"`
	FileUniqueID string `json:"file_unique_id"`
	FileName     string `json:"file_name,omitempty"`
	MimeType     string `json:"mime_type,omitempty"`
	FileSize     int64  `json:"file_size,omitempty"`
	Width        int    `json:"width,omitempty"`
	Height       int    `json:"height,omitempty"`
	Length       int    `json:"length,omitempty"` // a video note's diameter
}

// DefaultAttachmentMax is the cap a photo size is chosen under when the
// adapter is given none: the Bot API's own getFile limit (20 MB).
const DefaultAttachmentMax = 20 << 20

// attachmentsOf lists the files of m: the photo (the largest size under
// max, or the smallest when none is), a document, voice note, audio file,
// video note or video. A caption is the message's text, not a file.
func attachmentsOf(m *message, max int64) []core.Attachment {
	var out []core.Attachment
	if p, ok := bestPhoto(m.Photo, max); ok {
		out = append(out, core.Attachment{
			ID: firstNonEmpty(p.FileUniqueID, p.FileID), Name: "photo.jpg", Type: "image/jpeg", Kind: "photo",
			Size: p.FileSize, Ref: p.FileID, Width: p.Width, Height: p.Height,
		})
	}
	for _, f := range []struct {
		kind, name, typ string
		ref             *fileRef
	}{
		{"document", "document", "", m.Document},
		{"voice", "voice.ogg", "audio/ogg", m.Voice},
		{"audio", "audio", "", m.Audio},
		{"video_note", "video_note.mp4", "video/mp4", m.VideoNote},
		{"video", "video.mp4", "video/mp4", m.Video},
	} {
		r := f.ref
		if r == nil || r.FileID == "" {
			continue
		}
		a := core.Attachment{
			ID: firstNonEmpty(r.FileUniqueID, r.FileID), Name: firstNonEmpty(r.FileName, f.name),
			Type: firstNonEmpty(r.MimeType, f.typ), Kind: f.kind, Size: r.FileSize, Ref: r.FileID,
			Width: r.Width, Height: r.Height,
		}
		if r.Length > 0 {
			a.Width, a.Height = r.Length, r.Length
		}
		out = append(out, a)
	}
	return out
}

// bestPhoto picks the largest size whose declared size fits max (an
// undeclared size counts as fitting), or the smallest when none fits.
func bestPhoto(sizes []photoSize, max int64) (photoSize, bool) {
	var best, smallest photoSize
	found := false
	for i, p := range sizes {
		if p.FileID == "" {
			continue
		}
		if i == 0 || area(p) < area(smallest) || smallest.FileID == "" {
			smallest = p
		}
		if (p.FileSize == 0 || p.FileSize <= max) && (!found || area(p) > area(best)) {
			best, found = p, true
		}
	}
	if !found {
		return smallest, smallest.FileID != ""
	}
	return best, true
}

func area(p photoSize) int { return p.Width * p.Height }

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// defaultAPIHost is the Bot API's public host, reached through egress.
const defaultAPIHost = "api.telegram.org"

var _ core.AttachmentFetcher = (*Adapter)(nil)

// FetchAttachment implements core.AttachmentFetcher: getFile names the
// file's path, which is downloaded from the Bot API host's
// /file/bot<token>/<path>; the token in that URL is the authentication.
// Only the configured API host is ever asked.
func (a *Adapter) FetchAttachment(ctx context.Context, att core.Attachment, max int64) ([]byte, error) {
	var got struct {
		FileSize int64  `json:"file_size"`
		FilePath string `json:"file_path"`
	}
	if err := a.callInto(ctx, "getFile", tgbotapi.Params{"file_id": att.Ref}, &got); err != nil {
		return nil, fmt.Errorf("telegram: getFile %s: %w", att.ID, err)
	}
	if got.FilePath == "" {
		return nil, fmt.Errorf("telegram: getFile %s: no file path in the answer", att.ID)
	}
	if got.FileSize > max {
		return nil, fmt.Errorf("telegram: file %s: %d bytes: %w", att.ID, got.FileSize, core.ErrAttachmentTooLarge)
	}
	base, err := url.Parse(a.cfg.APIURL)
	if err != nil {
		return nil, fmt.Errorf("telegram: file %s: %w", att.ID, err)
	}
	path := strings.TrimLeft(got.FilePath, "/")
	if strings.Contains(path, "..") {
		return nil, fmt.Errorf("telegram: file %s: %w: bad file path", att.ID, core.ErrAttachmentHost)
	}
	ref := base.Scheme + "://" + base.Host + "/file/bot" + a.cfg.BotToken + "/" + path
	f := filefetch.Fetcher{Egress: a.files, Client: a.httpClient}
	if strings.EqualFold(base.Host, defaultAPIHost) {
		f.Hosts = []string{base.Host}
	} else {
		f.Local = []string{base.Host}
	}
	b, err := f.Get(ctx, ref, nil, max)
	if err != nil {
		// The URL holds the token: say which file, never the URL.
		if errors.Is(err, core.ErrAttachmentTooLarge) {
			return nil, fmt.Errorf("telegram: download file %s: %w", att.ID, core.ErrAttachmentTooLarge)
		}
		return nil, fmt.Errorf("telegram: download file %s: %s", att.ID, a.scrub(err.Error()))
	}
	return b, nil
}
