package attachments_test

import (
	"bytes"
	"context"
	"errors"
	"image"
	_ "image/png"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/marlowe-bot/marlowe/attachments"
	"github.com/marlowe-bot/marlowe/attachments/attachmentstest"
	"github.com/marlowe-bot/marlowe/core"
)

// files is a core.AttachmentFetcher over files in memory, honouring the
// cap as a surface does, and counting downloads.
type files struct {
	mu    sync.Mutex
	by    map[string][]byte
	fails map[string]error
	calls map[string]int
}

func (f *files) FetchAttachment(_ context.Context, a core.Attachment, max int64) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.calls == nil {
		f.calls = map[string]int{}
	}
	f.calls[a.ID]++
	if err := f.fails[a.ID]; err != nil {
		return nil, err
	}
	b, ok := f.by[a.Ref]
	if !ok {
		return nil, errors.New("HTTP 404")
	}
	if int64(len(b)) > max {
		return nil, core.ErrAttachmentTooLarge
	}
	return b, nil
}

// Every kind of file a person shares, made for real, through the reader:
// what the model gets and what it (and the person) is told.
func TestReadRealFiles(t *testing.T) {
	shot := attachmentstest.Screenshot(t, 1920, 1080)
	csv := attachmentstest.CSV(40)
	twoPages := attachmentstest.PDF(t, "Invoice 4711\nTotal due: 1,250 EUR", "Page two: payment terms net 30 days")
	scanned := attachmentstest.ScannedPDF(t, 2)
	f := &files{by: map[string][]byte{
		"shot": shot, "csv": csv, "pdf": twoPages, "scan": scanned, "empty": {},
		"liar": shot, "bomb": attachmentstest.PNGBomb(100_000, 100_000), "big": bytes.Repeat([]byte("x"), 5000),
		"bin": {0x00, 0x01, 0x02, 0xff, 0xfe, 0x00}, "log": []byte(strings.Repeat("INFO all good\n", 5000) + "ERROR disk full\n"),
	}}
	r := attachments.New(attachments.Config{MaxBytes: 4 << 20, MaxCount: 20, Images: true, MaxText: 8 << 10})
	at := func(ref, name, typ string, size int64) core.Attachment {
		return core.Attachment{ID: "id-" + ref, Name: name, Type: typ, Size: size, Ref: ref}
	}
	cases := []struct {
		att                 core.Attachment
		kind, typ           string
		text, note, notNote string
	}{
		{at("shot", "screenshot.png", "image/png", 0), core.SeenImage, "image/png", "", "scaled from 1920x1080 to 1568x882", ""},
		{at("csv", "orders.csv", "text/csv", 0), core.SeenText, "text/plain", "1017,cust17,119,FAILED", "", "cut"},
		{at("pdf", "invoice.pdf", "application/pdf", 0), core.SeenPDF, "application/pdf", "Total due: 1,250 EUR", "", "cut"},
		{at("scan", "scan.pdf", "application/pdf", 0), core.SeenUnreadable, "application/pdf", "", "no text layer", ""},
		{at("empty", "empty.txt", "text/plain", 0), core.SeenUnreadable, "", "", "empty (0 bytes)", ""},
		// The name says PDF; the content is a PNG: it is read as the image it is.
		{at("liar", "report.pdf", "application/pdf", 0), core.SeenImage, "image/png", "", "declared as application/pdf but its content is image/png", ""},
		{at("bomb", "bomb.png", "image/png", 0), core.SeenUnreadable, "image/png", "", "100000x100000 is past", ""},
		// Declared past the cap: refused before any download.
		{at("big", "huge.zip", "application/zip", 5<<20), core.SeenUnreadable, "application/zip", "", "past the 4.0 MiB limit (MARLOWE_ATTACHMENT_MAX_BYTES)", ""},
		{at("bin", "data.bin", "", 0), core.SeenUnreadable, "application/octet-stream", "", "unsupported type", ""},
		{at("log", "app.log", "text/plain", 0), core.SeenText, "text/plain", "ERROR disk full", "bytes (about", ""},
		{at("gone", "gone.txt", "text/plain", 0), core.SeenUnreadable, "text/plain", "", "the download failed", ""},
	}
	var atts []core.Attachment
	for _, c := range cases {
		atts = append(atts, c.att)
	}
	got := r.ReadAttachments(context.Background(), f, atts)
	if len(got) != len(cases) {
		t.Fatalf("got %d seen, want %d", len(got), len(cases))
	}
	for i, c := range cases {
		s := got[i]
		t.Run(c.att.Name, func(t *testing.T) {
			if s.ID != c.att.ID || s.Kind != c.kind || s.Type != c.typ {
				t.Errorf("id %q kind %q type %q, want %q %q %q (note %q)", s.ID, s.Kind, s.Type, c.att.ID, c.kind, c.typ, s.Note)
			}
			if !strings.Contains(s.Text, c.text) {
				t.Errorf("text %.200q lacks %q", s.Text, c.text)
			}
			if !strings.Contains(s.Note, c.note) || (c.notNote != "" && strings.Contains(s.Note, c.notNote)) {
				t.Errorf("note %q, want it to say %q (and not %q)", s.Note, c.note, c.notNote)
			}
			if s.Kind == core.SeenUnreadable && s.Note == "" {
				t.Error("unreadable without a note: dropped silently")
			}
		})
	}
	if f.calls["id-big"] != 0 {
		t.Errorf("a file declared past the cap was downloaded")
	}

	// The screenshot went to the model as a re-encoded image of the
	// scaled size, and the hash is of those bytes.
	img := got[0]
	if img.Image == nil || len(img.Pixels) == 0 {
		t.Fatal("no pixels for the screenshot")
	}
	cfg, format, err := image.DecodeConfig(bytes.NewReader(img.Pixels))
	if err != nil || format != "png" || cfg.Width != 1568 || cfg.Height != 882 || img.Image.Width != 1568 {
		t.Errorf("re-encoded %s %dx%d (%v), seen %+v", format, cfg.Width, cfg.Height, err, img.Image)
	}
	if len(img.Image.SHA256) != 64 || img.Tokens <= 0 {
		t.Errorf("seen %+v tokens %d", img.Image, img.Tokens)
	}
	// The two-page PDF's text is there page by page.
	if p := got[2].Text; !strings.Contains(p, "--- page 1 ---") || !strings.Contains(p, "net 30 days") {
		t.Errorf("pdf text %q", p)
	}
	// The long log kept its head and tail.
	if l := got[9]; !strings.HasPrefix(l.Text, "INFO all good") || !strings.Contains(l.Text, "bytes cut") || len(l.Text) > 9<<10 {
		t.Errorf("log: %d bytes, note %q", len(l.Text), l.Note)
	}
}

// Past MARLOWE_ATTACHMENT_MAX_COUNT the rest are named, not read.
func TestReadAtMostMaxCount(t *testing.T) {
	f := &files{by: map[string][]byte{"a": []byte("one"), "b": []byte("two"), "c": []byte("three")}}
	r := attachments.New(attachments.Config{MaxCount: 2})
	got := r.ReadAttachments(context.Background(), f, []core.Attachment{
		{ID: "1", Ref: "a"}, {ID: "2", Ref: "b"}, {ID: "3", Name: "third.txt", Ref: "c"},
	})
	if got[0].Text != "one" || got[1].Text != "two" || got[2].Kind != core.SeenUnreadable || !strings.Contains(got[2].Note, "at most 2 attachments") {
		t.Fatalf("%+v", got)
	}
	if f.calls["3"] != 0 {
		t.Error("the third was downloaded")
	}
}

// With vision off an image is named and the person told the model cannot
// see images; with no surface fetcher, nothing is downloaded and it says so.
func TestImagesWithoutVisionAndNoFetcher(t *testing.T) {
	f := &files{by: map[string][]byte{"s": attachmentstest.Screenshot(t, 64, 48)}}
	r := attachments.New(attachments.Config{Images: false})
	got := r.ReadAttachments(context.Background(), f, []core.Attachment{{ID: "1", Ref: "s"}})
	if got[0].Kind != core.SeenUnreadable || !strings.Contains(got[0].Note, "cannot see images") || got[0].Pixels != nil {
		t.Errorf("%+v", got[0])
	}
	got = r.ReadAttachments(context.Background(), nil, []core.Attachment{{ID: "1", Ref: "s"}})
	if !strings.Contains(got[0].Note, "cannot be downloaded") {
		t.Errorf("%+v", got[0])
	}
}

// Voice goes to the OpenAI-compatible transcription endpoint (multipart
// file + model); without a transcriber the note says which settings to set.
func TestVoiceTranscribed(t *testing.T) {
	var mu sync.Mutex
	var gotModel string
	var gotBytes int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/audio/transcriptions" || r.Header.Get("Authorization") != "Bearer k" {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		mr, err := r.MultipartReader()
		if err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		for {
			p, err := mr.NextPart()
			if err != nil {
				break
			}
			b, _ := io.ReadAll(p)
			mu.Lock()
			switch p.FormName() {
			case "model":
				gotModel = string(b)
			case "file":
				gotBytes = len(b)
			}
			mu.Unlock()
		}
		_, _ = w.Write([]byte(`{"text":" the deploy failed at step three "}`))
	}))
	defer srv.Close()
	_ = multipart.ErrMessageTooLarge
	voice := attachmentstest.OggVoice()
	f := &files{by: map[string][]byte{"v": voice}}
	cfg, _, err := attachments.ConfigFromEnv(func(k string) string {
		return map[string]string{attachments.EnvTranscribeURL: srv.URL + "/v1", attachments.EnvTranscribeMod: "whisper-1", attachments.EnvTranscribeKey: "k"}[k]
	})
	if err != nil {
		t.Fatal(err)
	}
	got := attachments.New(cfg).ReadAttachments(context.Background(), f, []core.Attachment{{ID: "v1", Kind: "voice", Ref: "v"}})
	if got[0].Kind != core.SeenTranscript || got[0].Text != "the deploy failed at step three" || got[0].Type != "audio/ogg" {
		t.Errorf("%+v", got[0])
	}
	mu.Lock()
	if gotModel != "whisper-1" || gotBytes != len(voice) {
		t.Errorf("endpoint got model %q and %d bytes", gotModel, gotBytes)
	}
	mu.Unlock()
	none := attachments.New(attachments.Config{}).ReadAttachments(context.Background(), f, []core.Attachment{{ID: "v1", Ref: "v"}})
	if none[0].Kind != core.SeenUnreadable || !strings.Contains(none[0].Note, "no transcriber is configured") {
		t.Errorf("%+v", none[0])
	}
}

// Bad settings are refused with their names.
func TestConfigFromEnvRefusesBadValues(t *testing.T) {
	for _, env := range []map[string]string{
		{attachments.EnvMaxBytes: "lots"},
		{attachments.EnvMaxCount: "-1"},
		{attachments.EnvVision: "maybe"},
		{attachments.EnvTranscribeURL: "http://x/v1"},
	} {
		_, _, err := attachments.ConfigFromEnv(func(k string) string { return env[k] })
		if err == nil {
			t.Errorf("%v accepted", env)
			continue
		}
		for k := range env {
			if !strings.Contains(err.Error(), k) {
				t.Errorf("error %q does not name %s", err, k)
			}
		}
	}
}
