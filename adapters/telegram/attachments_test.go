package telegram

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/intent"
)

// Each kind of file a person can send becomes one attachment with its
// declared name, type and size, and the file_id as the reference; a
// captionless file is a person's post (no subtype), so inside a window it
// is a follow-up, and without one it is ignored like any untagged post.
func TestTelegramFilesNormalise(t *testing.T) {
	f := newFake(t)
	a, _ := newAdapter(t, testConfig(f, ModePolling), WithAttachmentMax(100_000))
	for _, c := range []struct {
		name, body string
		want       string // kind name type size WxH
	}{
		{"document", `"document":{"file_id":"D1","file_unique_id":"UD1","file_name":"report.pdf","mime_type":"application/pdf","file_size":5000}`, "document report.pdf application/pdf 5000 0x0"},
		{"voice", `"voice":{"file_id":"V1","file_unique_id":"UV1","duration":3,"mime_type":"audio/ogg","file_size":800}`, "voice voice.ogg audio/ogg 800 0x0"},
		{"audio", `"audio":{"file_id":"A1","file_unique_id":"UA1","duration":3,"file_name":"song.mp3","mime_type":"audio/mpeg","file_size":9000}`, "audio song.mp3 audio/mpeg 9000 0x0"},
		{"video note", `"video_note":{"file_id":"N1","file_unique_id":"UN1","length":240,"duration":2,"file_size":700}`, "video_note video_note.mp4 video/mp4 700 240x240"},
		// The largest size is past the cap: the largest under it is taken.
		{"photo under the cap", `"photo":[{"file_id":"P1","file_unique_id":"a","file_size":2000,"width":90,"height":90},{"file_id":"P2","file_unique_id":"b","file_size":90000,"width":800,"height":800},{"file_id":"P3","file_unique_id":"c","file_size":400000,"width":2560,"height":2560}]`, "photo photo.jpg image/jpeg 90000 800x800"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var m message
			raw := `{"message_id":7,"from":{"id":42,"is_bot":false,"first_name":"Ann"},"chat":{"id":-100500,"type":"supergroup"},"date":1700000000,` + c.body + `}`
			if err := json.Unmarshal([]byte(raw), &m); err != nil {
				t.Fatal(err)
			}
			ev, err := a.normalise(&m, false)
			if err != nil {
				t.Fatal(err)
			}
			if ev.Subtype != "" || ev.Text != "" || len(ev.Attachments) != 1 {
				t.Fatalf("subtype %q text %q attachments %+v", ev.Subtype, ev.Text, ev.Attachments)
			}
			at := ev.Attachments[0]
			got := strings.Join([]string{at.Kind, at.Name, at.Type, itoa(at.Size), itoa(int64(at.Width)) + "x" + itoa(int64(at.Height))}, " ")
			if got != c.want {
				t.Errorf("attachment %q, want %q", got, c.want)
			}
			// No window: an untagged captionless file in a group is
			// ignored, as its text alone would be.
			if d := intent.Decide(ev, intent.Windows{}, time.Now()); d.Route {
				t.Errorf("routed without a window: %s", d.Reason)
			}
		})
	}
}

// FetchAttachment asks getFile for the path and downloads it with the
// token in the URL; a wrong token gets 403 from the fake, a file past the
// cap is refused from getFile's declared size before any download.
func TestFetchAttachmentTelegram(t *testing.T) {
	f := newFake(t)
	content := bytes.Repeat([]byte{0x4f, 0x67, 0x67, 0x53}, 300)
	id := f.HostFile(content)
	at := core.Attachment{ID: id, Kind: "voice", Ref: id}
	ctx := context.Background()

	a, logs := newAdapter(t, testConfig(f, ModePolling))
	got, err := a.FetchAttachment(ctx, at, 1<<20)
	if err != nil || !bytes.Equal(got, content) {
		t.Fatalf("fetch: %v (%d bytes)", err, len(got))
	}
	if _, err := a.FetchAttachment(ctx, at, 100); !errors.Is(err, core.ErrAttachmentTooLarge) {
		t.Errorf("past the cap: %v", err)
	}
	if n := f.Downloads(id); n != 1 {
		t.Errorf("downloads = %d, want 1 (the capped one stops at getFile's size)", n)
	}

	// Another token: getFile is refused, and the file URL itself answers
	// 403; the error never quotes the token.
	cfg := testConfig(f, ModePolling)
	cfg.BotToken = "999:WRONGtoken"
	b, _ := newAdapter(t, cfg)
	_, err = b.FetchAttachment(ctx, at, 1<<20)
	if err == nil {
		t.Fatal("a wrong token fetched the file")
	}
	if strings.Contains(err.Error(), "WRONGtoken") || strings.Contains(logs.String(), f.Config().Token) {
		t.Errorf("token leaked: %v", err)
	}
	resp, err := http.Get(f.URL() + "/file/bot999:WRONGtoken/documents/" + id)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("file URL with a wrong token: %d, want 403", resp.StatusCode)
	}
}
