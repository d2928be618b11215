package discord

import (
	"context"
	"fmt"
	"net/url"

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
