package slack

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/slack-go/slack/slackevents"

	"github.com/marlowe-bot/marlowe/adapters/slack/slackfake"
	"github.com/marlowe-bot/marlowe/core"
)

// The captured file_share payloads (slackapi/bolt-python fixtures, copied
// from the shared folder with their MANIFEST.tsv rows) become events that
// carry their files: id, name, declared type, size and the private
// download URL, and no subtype (a file_share is a person's post).
func TestFileSharePayloadsCarryAttachments(t *testing.T) {
	f := newFake(t)
	a, _ := newAdapter(t, testConfig(f, ModeSocket))
	for _, c := range []struct {
		file       string
		id, name   string
		typ        string
		size       int64
		w, h       int
		text       string
		visibility core.Visibility
	}{
		{"bp-file-share.json", "F111", "file.png", "image/png", 92582, 1134, 362, "Hi there!", core.Public},
		{"bp-file-share-group.json", "F111", "test.png", "image/png", 42706, 736, 740, "", core.Private},
	} {
		t.Run(c.file, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join("testdata", "slack-payloads", c.file))
			if err != nil {
				t.Fatal(err)
			}
			ev, err := slackevents.ParseEvent(raw, slackevents.OptionNoVerifyToken())
			if err != nil {
				t.Fatalf("parse: %v", err)
			}
			items := a.fromEventsAPI(context.Background(), ev)
			if len(items) != 1 || items[0].in.Event == nil {
				t.Fatalf("got %d items, want one event", len(items))
			}
			got := items[0].in.Event
			if got.Subtype != "" {
				t.Errorf("subtype = %q, want none (a file_share is a person's post)", got.Subtype)
			}
			if len(got.Attachments) != 1 {
				t.Fatalf("attachments = %+v, want one", got.Attachments)
			}
			at := got.Attachments[0]
			if at.ID != c.id || at.Name != c.name || at.Type != c.typ || (c.size != 0 && at.Size != c.size) || at.Width != c.w || at.Height != c.h {
				t.Errorf("attachment = %+v", at)
			}
			if !strings.HasPrefix(at.Ref, "https://files.slack.com/files-pri/") {
				t.Errorf("ref = %q, want the private download URL", at.Ref)
			}
			if c.file == "bp-file-share.json" && (got.Text != c.text || !strings.Contains(at.Ref, "/download/")) {
				t.Errorf("text %q ref %q", got.Text, at.Ref)
			}
		})
	}
}

// FetchAttachment downloads with the bot token; the fake answers another
// token with 403, and the adapter never fetches from a host that is not
// Slack's (a URL a message's text could carry), nor past the cap.
func TestFetchAttachmentSlack(t *testing.T) {
	f := newFake(t, func(c *slackfake.Config) { c.BotToken = "xoxb-right" })
	content := bytes.Repeat([]byte("a,b\n1,2\n"), 100)
	file := f.HostFile("data.csv", "text/csv", content)
	at := core.Attachment{ID: file["id"].(string), Name: "data.csv", Ref: file["url_private_download"].(string)}
	ctx := context.Background()

	cfg := testConfig(f, ModeSocket)
	cfg.BotToken = "xoxb-right"
	a, _ := newAdapter(t, cfg)
	got, err := a.FetchAttachment(ctx, at, 1<<20)
	if err != nil || !bytes.Equal(got, content) {
		t.Fatalf("fetch: %v (%d bytes)", err, len(got))
	}

	if _, err := a.FetchAttachment(ctx, at, 100); !errors.Is(err, core.ErrAttachmentTooLarge) {
		t.Errorf("past the cap: %v, want ErrAttachmentTooLarge", err)
	}

	evil := at
	evil.Ref = "http://127.0.0.2:1/steal"
	if _, err := a.FetchAttachment(ctx, evil, 1<<20); !errors.Is(err, core.ErrAttachmentHost) {
		t.Errorf("foreign host: %v, want ErrAttachmentHost", err)
	}

	cfg.BotToken = "xoxb-wrong"
	b, _ := newAdapter(t, cfg)
	if _, err := b.FetchAttachment(ctx, at, 1<<20); err == nil || !strings.Contains(err.Error(), "403") {
		t.Errorf("wrong token: %v, want HTTP 403", err)
	}
	if n := f.Downloads(at.ID); n != 2 {
		t.Errorf("downloads = %d, want 2 (the right token's; the cap is found from Content-Length)", n)
	}
}

// An app installed without files:read gets Slack's sign-in page for a
// file (200, HTML): the adapter refuses it, naming the scope, instead of
// handing a web page to the model as the file.
func TestFetchWithoutFilesReadNamesTheScope(t *testing.T) {
	f := newFake(t, func(c *slackfake.Config) {
		c.Scopes = slices.DeleteFunc(RequiredScopes(), func(s string) bool { return s == "files:read" })
	})
	file := f.HostFile("shot.png", "image/png", []byte("\x89PNG\r\n\x1a\n...."))
	a, _ := newAdapter(t, testConfig(f, ModeSocket))
	_, err := a.FetchAttachment(context.Background(), core.Attachment{ID: "F", Type: "image/png", Ref: file["url_private_download"].(string)}, 1<<20)
	if err == nil || !strings.Contains(err.Error(), "files:read") {
		t.Fatalf("fetch without files:read: %v", err)
	}
}
