package discord

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"path"
	"strings"

	"github.com/bwmarrin/discordgo"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/internal/filefetch"
)

// cdnHosts are where Discord serves attachments (signed, expiring URLs).
var cdnHosts = []string{"cdn.discordapp.com", "media.discordapp.net"}

// attachmentsOf keeps a message's attachments: id, file name, declared
// content type and size, and the CDN URL as the reference. An ephemeral
// attachment (only its interaction's user sees it) is kept too: the URL
// works for the bot all the same.
func attachmentsOf(list []*discordgo.MessageAttachment) []core.Attachment {
	var out []core.Attachment
	for _, a := range list {
		if a == nil || a.ID == "" || a.URL == "" {
			continue
		}
		kind := ""
		if a.DurationSecs > 0 && a.Waveform != "" {
			kind = "voice" // a voice message: an audio file with a waveform
		}
		out = append(out, core.Attachment{
			ID: a.ID, Name: a.Filename, Type: a.ContentType, Kind: kind, Size: int64(a.Size), Ref: a.URL,
			Width: a.Width, Height: a.Height,
		})
	}
	return out
}

// applyTitles makes each attachment's title its file name. Discord's API
// documentation says title holds the name as uploaded, with its special
// characters (Cyrillic, say), when filename is a sanitised version without
// them. discordgo's attachment type has no title field, so it is read from
// the raw message. When the title lacks the filename's extension, the
// extension is kept. Only the gateway's MESSAGE_CREATE is decoded here:
// history read over REST (gap fill, thread context) keeps the sanitised
// filename.
func applyTitles(m *discordgo.Message, raw []byte) {
	var t struct {
		Attachments []struct {
			ID    string `json:"id"`
			Title string `json:"title"`
		} `json:"attachments"`
	}
	if len(m.Attachments) == 0 || json.Unmarshal(raw, &t) != nil {
		return
	}
	for _, x := range t.Attachments {
		title := strings.TrimSpace(x.Title)
		if title == "" {
			continue
		}
		for _, att := range m.Attachments {
			if att == nil || att.ID != x.ID {
				continue
			}
			if ext := path.Ext(att.Filename); ext != "" && !strings.HasSuffix(strings.ToLower(title), strings.ToLower(ext)) {
				title += ext
			}
			att.Filename = title
		}
	}
}

var _ core.AttachmentFetcher = (*Adapter)(nil)

// FetchAttachment implements core.AttachmentFetcher: the attachment's
// signed CDN URL, from Discord's CDN hosts only, through the egress
// transport (or the configured API URL's host, a local fake Discord). The CDN needs no token, and none is
// sent: the bot token never leaves for a file host.
func (a *Adapter) FetchAttachment(ctx context.Context, att core.Attachment, max int64) ([]byte, error) {
	f := filefetch.Fetcher{Hosts: cdnHosts, Egress: a.files, Client: a.client}
	if a.cfg.APIURL != "" && a.cfg.APIURL != DefaultAPIURL {
		if u, err := url.Parse(a.cfg.APIURL); err == nil && u.Host != "" {
			f.Local = []string{u.Host}
		}
	}
	b, err := f.Get(ctx, att.Ref, nil, max)
	if err != nil {
		return nil, fmt.Errorf("discord: fetch attachment %s: %w", att.ID, err)
	}
	return b, nil
}
