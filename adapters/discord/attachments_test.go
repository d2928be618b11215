package discord

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bwmarrin/discordgo"

	"github.com/marlowe-bot/marlowe/adapters/discord/discordfake"
	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/internal/filefetch"
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

// docsShapedAttachments is a MESSAGE_CREATE whose attachments follow the
// attachment object documented by Discord
// (https://discord.com/developers/docs/resources/message#attachment-object):
// an image with its dimensions, alt text (description) and the original
// name in title, a voice message (message flag IS_VOICE_MESSAGE 1<<13,
// duration_secs a float, a base64 waveform) and a text file whose
// width/height are null. It is WRITTEN for this test from that
// documentation, not captured from Discord: no captured voice message and
// no captured attachment with a title were found (the one captured
// attachment payload, testdata/discord-attachment-payloads, is an image
// without a title). The ids, CDN signatures and timestamps are made up.
const docsShapedAttachments = `{
  "id": "1300000000000100001", "type": 0, "content": "", "channel_id": "` + general + `", "guild_id": "` + guildID + `",
  "author": {"id": "` + "200000000000000001" + `", "username": "alice", "global_name": "Alice", "avatar": null, "discriminator": "0", "public_flags": 0},
  "attachments": [
    {"id": "1300000000000200001", "filename": "screenshot.png", "title": "скриншот.png", "description": "the error dialog",
     "content_type": "image/png", "size": 48213,
     "url": "https://cdn.discordapp.com/attachments/300000000000000010/1300000000000200001/screenshot.png?ex=67a1b2c3&is=67a06143&hm=3f1c0e9d2b7a4c5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6&",
     "proxy_url": "https://media.discordapp.net/attachments/300000000000000010/1300000000000200001/screenshot.png?ex=67a1b2c3&is=67a06143&hm=3f1c0e9d2b7a4c5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6&",
     "width": 1920, "height": 1080, "placeholder": "2AgGDwK3d4d4h3d3eHeIh4iGeHhIh4l4dw==", "placeholder_version": 1, "flags": 0},
    {"id": "1300000000000200002", "filename": "voice-message.ogg", "content_type": "audio/ogg", "size": 21422,
     "url": "https://cdn.discordapp.com/attachments/300000000000000010/1300000000000200002/voice-message.ogg?ex=67a1b2c3&is=67a06143&hm=aa&",
     "proxy_url": "https://media.discordapp.net/attachments/300000000000000010/1300000000000200002/voice-message.ogg?ex=67a1b2c3&is=67a06143&hm=aa&",
     "duration_secs": 3.48, "waveform": "AAAsHGqGcmOBgZGGfI6EmIqOho6PkJeVlpeam56enZ+goaKjpKWmp6ipqqusra6v", "flags": 0},
    {"id": "1300000000000200003", "filename": "app.log", "content_type": "text/plain; charset=utf-8", "size": 3071,
     "url": "https://cdn.discordapp.com/attachments/300000000000000010/1300000000000200003/app.log?ex=67a1b2c3&is=67a06143&hm=bb&",
     "proxy_url": "https://media.discordapp.net/attachments/300000000000000010/1300000000000200003/app.log?ex=67a1b2c3&is=67a06143&hm=bb&",
     "width": null, "height": null}
  ],
  "embeds": [], "mentions": [], "mention_roles": [], "pinned": false, "mention_everyone": false, "tts": false,
  "timestamp": "2026-01-02T10:00:00.000000+00:00", "edited_timestamp": null, "flags": 8192, "components": []
}`

// A message shaped like Discord's documented attachment object (not a
// capture: see docsShapedAttachments) normalises every attachment: id,
// file name, declared type, size, the CDN URL as the reference (on a host
// the fetcher accepts), an image's dimensions, and a voice message marked
// as one; a message of files and no text is a person's post.
func TestDocsShapedDiscordAttachmentsNormalise(t *testing.T) {
	f := newFake(t, discordfake.Config{})
	rec := newRecorder()
	startAdapter(t, f, rec.deliver)
	f.Dispatch("MESSAGE_CREATE", json.RawMessage(docsShapedAttachments))
	rec.waitFor(t, "the message", func() bool { return len(rec.events()) == 1 })
	ev := rec.events()[0]
	if ev.Subtype != "" || ev.Author.ID != alice.ID {
		t.Errorf("subtype %q author %+v", ev.Subtype, ev.Author)
	}
	want := []core.Attachment{
		// The original, non-ASCII name in title is the name shown.
		{ID: "1300000000000200001", Name: "скриншот.png", Type: "image/png", Size: 48213, Width: 1920, Height: 1080},
		{ID: "1300000000000200002", Name: "voice-message.ogg", Type: "audio/ogg", Kind: "voice", Size: 21422},
		{ID: "1300000000000200003", Name: "app.log", Type: "text/plain; charset=utf-8", Size: 3071},
	}
	if len(ev.Attachments) != len(want) {
		t.Fatalf("attachments %+v", ev.Attachments)
	}
	fetch := filefetch.Fetcher{Hosts: cdnHosts}
	for i, w := range want {
		got := ev.Attachments[i]
		if !strings.HasPrefix(got.Ref, "https://cdn.discordapp.com/attachments/") {
			t.Errorf("%s: ref %q, want the CDN url", w.Name, got.Ref)
		}
		if _, err := fetch.Allowed(got.Ref); err != nil {
			t.Errorf("%s: the fetcher would refuse its ref: %v", w.Name, err)
		}
		got.Ref = ""
		if got != w {
			t.Errorf("attachment %d\n got %+v\nwant %+v", i, got, w)
		}
	}
}

// Captured Discord messages with attachments
// (testdata/discord-attachment-payloads, sources in its MANIFEST.tsv),
// replayed through the gateway: each attachment keeps its id, file name,
// declared type, size, dimensions and CDN URL as the reference, on a host
// the fetcher accepts.
func TestCapturedDiscordAttachments(t *testing.T) {
	dir := filepath.Join("testdata", "discord-attachment-payloads")
	manifest, err := os.ReadFile(filepath.Join(dir, "MANIFEST.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		file, guild, channel string
		want                 []core.Attachment
	}{
		{"atc-message-create-spoiler-image.json", "705745250815311942", "1072828564317159465", []core.Attachment{{
			ID: "1492875574174154943", Name: "SPOILER_1122943867721875456.png", Type: "image/png", Size: 492063, Width: 80, Height: 80,
			Ref: "https://cdn.discordapp.com/attachments/1072828564317159465/1492875574174154943/SPOILER_1122943867721875456.png?ex=69dcec39&is=69db9ab9&hm=992b357861cbb393bf8fdfac2690f576b6283968400d3cd18dd2d9f7e117c65b&",
		}}},
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	if len(files) != len(cases) {
		t.Errorf("%d payload files, %d cases: every captured file needs a case", len(files), len(cases))
	}
	f := newFake(t, discordfake.Config{})
	rec := newRecorder()
	startAdapter(t, f, rec.deliver)
	fetch := filefetch.Fetcher{Hosts: cdnHosts}
	for i, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			if !strings.Contains(string(manifest), c.file+"\t") {
				t.Fatalf("%s has no MANIFEST.tsv row naming its source", c.file)
			}
			raw, err := os.ReadFile(filepath.Join(dir, c.file))
			if err != nil {
				t.Fatal(err)
			}
			var frame struct {
				T string          `json:"t"`
				D json.RawMessage `json:"d"`
			}
			if err := json.Unmarshal(raw, &frame); err != nil || frame.T != "MESSAGE_CREATE" {
				t.Fatalf("frame %q: %v", frame.T, err)
			}
			f.AddChannel(c.guild, discordfake.Channel{ID: c.channel, Type: 0})
			f.Dispatch(frame.T, frame.D)
			rec.waitFor(t, "the message", func() bool { return len(rec.events()) == i+1 })
			ev := rec.events()[i]
			if ev.Subtype != "" {
				t.Errorf("subtype %q: a message of files is a person's post", ev.Subtype)
			}
			if len(ev.Attachments) != len(c.want) {
				t.Fatalf("attachments %+v", ev.Attachments)
			}
			for j, w := range c.want {
				if got := ev.Attachments[j]; got != w {
					t.Errorf("attachment %d\n got %+v\nwant %+v", j, got, w)
				}
				if _, err := fetch.Allowed(ev.Attachments[j].Ref); err != nil {
					t.Errorf("the fetcher would refuse its ref: %v", err)
				}
			}
		})
	}
}

// applyTitles shows the name as uploaded (title) in place of the sanitised
// filename, keeps the filename's extension when the title has none, and
// leaves an attachment without a title alone.
func TestApplyTitles(t *testing.T) {
	m := discordgo.Message{Attachments: []*discordgo.MessageAttachment{
		{ID: "1", Filename: "screenshot.png"},
		{ID: "2", Filename: "c953b519a8c28c42.pdf"},
		{ID: "3", Filename: "plain.txt"},
		{ID: "4", Filename: "README"},
	}}
	raw := `{"attachments":[{"id":"1","title":"скриншот.png"},{"id":"2","title":"전시부스 안내"},{"id":"3"},{"id":"4","title":"прочти"}]}`
	applyTitles(&m, []byte(raw))
	want := []string{"скриншот.png", "전시부스 안내.pdf", "plain.txt", "прочти"}
	for i, w := range want {
		if got := m.Attachments[i].Filename; got != w {
			t.Errorf("attachment %d: %q, want %q", i, got, w)
		}
	}
}

// A voice message is recognised from the attachment (duration and
// waveform) or from the message's IS_VOICE_MESSAGE flag when Discord left
// those out; an image in a flagged message, or audio in an unflagged one
// without a waveform, is not a voice note.
func TestVoiceMessageRecognised(t *testing.T) {
	cases := []struct {
		name  string
		att   discordgo.MessageAttachment
		flag  bool
		voice bool
	}{
		{"waveform and duration", discordgo.MessageAttachment{ContentType: "audio/ogg", DurationSecs: 3.2, Waveform: "AAEC"}, false, true},
		{"flag, no waveform", discordgo.MessageAttachment{ContentType: "audio/ogg"}, true, true},
		{"flag, undeclared type", discordgo.MessageAttachment{}, true, true},
		{"flag, an image", discordgo.MessageAttachment{ContentType: "image/png"}, true, false},
		{"plain audio file", discordgo.MessageAttachment{ContentType: "audio/mpeg"}, false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := c.att
			a.ID, a.URL, a.Filename = "1", "https://cdn.discordapp.com/attachments/1/1/f", "f"
			got := attachmentsOf([]*discordgo.MessageAttachment{&a}, c.flag)
			if len(got) != 1 || (got[0].Kind == "voice") != c.voice {
				t.Errorf("%+v, want voice %v", got, c.voice)
			}
		})
	}
}

// The title is the name both on the gateway and when the message is read
// back over REST (History; gap fill reads the same way): the fake stores
// the attachment object as sent, title included.
func TestAttachmentTitleOnGatewayAndHistory(t *testing.T) {
	f := newFake(t, discordfake.Config{})
	rec := newRecorder()
	a := startAdapter(t, f, rec.deliver)
	att := f.HostFile(general, "screenshot.png", "image/png", []byte("\x89PNG\r\n\x1a\n...."))
	att["title"] = "скриншот"
	f.Say(discordfake.Msg{Channel: general, Author: alice, Attachments: []map[string]any{att}})
	rec.waitFor(t, "the message", func() bool { return len(rec.events()) == 1 })
	if got := rec.events()[0].Attachments; len(got) != 1 || got[0].Name != "скриншот.png" {
		t.Errorf("gateway: %+v, want the title with the extension", got)
	}
	h, err := a.History(context.Background(), scopeOf(general, ""), 10)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, ev := range h {
		for _, at := range ev.Attachments {
			names = append(names, at.Name)
		}
	}
	if len(names) != 1 || names[0] != "скриншот.png" {
		t.Errorf("history: %q, want [скриншот.png]", names)
	}
}
