package attachments

import (
	"bytes"
	"net/http"
	"strings"
	"unicode/utf8"
)

// class is what the reader does with a file.
type class int

const (
	classUnknown class = iota
	classImage
	classText
	classPDF
	classAudio
	classVideo
)

// sniff decides a file's type from its first bytes: net/http's content
// sniffing plus the magic numbers it lacks (PDF is there; Ogg, MP4/M4A,
// WebM, FLAC, AMR are checked here), and text when the bytes are valid
// UTF-8 without NULs. The declared name and type are never trusted.
func sniff(b []byte) (string, class) {
	head := b
	if len(head) > 512 {
		head = head[:512]
	}
	switch {
	case bytes.HasPrefix(head, []byte("%PDF-")):
		return "application/pdf", classPDF
	case bytes.HasPrefix(head, []byte("OggS")):
		if bytes.Contains(head, []byte("theora")) {
			return "video/ogg", classVideo
		}
		return "audio/ogg", classAudio
	case bytes.HasPrefix(head, []byte("fLaC")):
		return "audio/flac", classAudio
	case bytes.HasPrefix(head, []byte("#!AMR")):
		return "audio/amr", classAudio
	case len(head) >= 12 && string(head[4:8]) == "ftyp":
		brand := string(head[8:12])
		if strings.HasPrefix(brand, "M4A") || brand == "M4B " {
			return "audio/mp4", classAudio
		}
		return "video/mp4", classVideo
	}
	ct := http.DetectContentType(head)
	mt, _, _ := strings.Cut(ct, ";")
	switch {
	case mt == "image/png" || mt == "image/jpeg" || mt == "image/gif" || mt == "image/webp" || mt == "image/bmp":
		return mt, classImage
	case strings.HasPrefix(mt, "audio/") || mt == "application/ogg":
		return mt, classAudio
	case strings.HasPrefix(mt, "video/"):
		return mt, classVideo
	case strings.HasPrefix(mt, "text/") && textLike(b):
		if mt == "text/html" || mt == "text/xml" {
			return mt, classText
		}
		return "text/plain", classText
	case mt == "application/octet-stream" && len(b) > 0 && textLike(b):
		return "text/plain", classText
	}
	return mt, classUnknown
}

// textLike: valid UTF-8 (a rune cut at the end is fine) without NUL bytes.
func textLike(b []byte) bool {
	if bytes.IndexByte(b, 0) >= 0 {
		return false
	}
	for i := 0; i < 3 && len(b) > 0 && !utf8.Valid(b); i++ {
		b = b[:len(b)-1]
	}
	return utf8.Valid(b)
}
