package discord

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/marlowe-bot/marlowe/adapters/discord/discordfake"
	"github.com/marlowe-bot/marlowe/core"
)

// A message with attachments and no text, through the real gateway path:
// each attachment arrives with its id, file name, declared type, size and
// CDN URL, the message is a person's post (no subtype), and the adapter
// downloads the bytes from the CDN URL, which the fake signs as Discord
// does (a tampered signature gets 403); a host that is not Discord's is
// never asked.
func TestDiscordAttachmentsArriveAndFetch(t *testing.T) {
	f := newFake(t, discordfake.Config{})
	rec := newRecorder()
	a := startAdapter(t, f, rec.deliver)
	png := append([]byte("\x89PNG\r\n\x1a\n"), bytes.Repeat([]byte{1}, 64)...)
	csv := []byte("name,qty\nbolts,4\n")
	img := f.HostFile(general, "screen.png", "image/png", png)
	doc := f.HostFile(general, "stock.csv", "", csv)
	f.Say(discordfake.Msg{Channel: general, Author: alice, Content: "", Attachments: []map[string]any{img, doc}})
	rec.waitFor(t, "the message", func() bool { return len(rec.events()) == 1 })
	ev := rec.events()[0]
	if ev.Subtype != "" || len(ev.Attachments) != 2 {
		t.Fatalf("subtype %q attachments %+v", ev.Subtype, ev.Attachments)
	}
	got := ev.Attachments[0]
	if got.ID != img["id"] || got.Name != "screen.png" || got.Type != "image/png" || got.Size != int64(len(png)) || !strings.Contains(got.Ref, "hm=") {
		t.Errorf("attachment %+v", got)
	}
	if ev.Attachments[1].Type != "" || ev.Attachments[1].Name != "stock.csv" {
		t.Errorf("undeclared type: %+v", ev.Attachments[1])
	}

	ctx := context.Background()
	b, err := a.FetchAttachment(ctx, got, 1<<20)
	if err != nil || !bytes.Equal(b, png) {
		t.Fatalf("fetch: %v (%d bytes)", err, len(b))
	}
	if _, err := a.FetchAttachment(ctx, got, 10); !errors.Is(err, core.ErrAttachmentTooLarge) {
		t.Errorf("past the cap: %v", err)
	}
	tampered := got
	tampered.Ref = strings.Replace(got.Ref, "hm=", "hm=00", 1)
	if _, err := a.FetchAttachment(ctx, tampered, 1<<20); err == nil || !strings.Contains(err.Error(), "403") {
		t.Errorf("tampered signature: %v, want 403", err)
	}
	foreign := got
	foreign.Ref = "https://example.com/attachments/x.png"
	if _, err := a.FetchAttachment(ctx, foreign, 1<<20); !errors.Is(err, core.ErrAttachmentHost) {
		t.Errorf("foreign host: %v", err)
	}
	if n := f.Downloads(got.ID); n != 2 {
		t.Errorf("downloads %d, want 2 (the whole one, and the one refused from its Content-Length)", n)
	}
}
