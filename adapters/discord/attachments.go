package discord

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"strconv"
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
// works for the bot all the same. A voice message is an audio attachment
// with a duration and a waveform, or an audio (or undeclared) attachment
// of a message flagged IS_VOICE_MESSAGE (voice), whichever Discord sent.
func attachmentsOf(list []*discordgo.MessageAttachment, voice bool) []core.Attachment {
	var out []core.Attachment
	for _, a := range list {
		if a == nil || a.ID == "" || a.URL == "" {
			continue
		}
		kind := ""
		if (a.DurationSecs > 0 && a.Waveform != "") || (voice && (a.ContentType == "" || strings.HasPrefix(a.ContentType, "audio/"))) {
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
// extension is kept. The gateway's MESSAGE_CREATE and the REST reads
// (channelMessages, channelMessage: history, gap fill) all go through it.
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

// channelMessages is discordgo's Session.ChannelMessages (limit, after),
// decoding each message with its attachments' titles (applyTitles).
func (a *Adapter) channelMessages(channel string, limit int, after string, opts ...discordgo.RequestOption) ([]*discordgo.Message, error) {
	uri := discordgo.EndpointChannelMessages(channel)
	v := url.Values{}
	if limit > 0 {
		v.Set("limit", strconv.Itoa(limit))
	}
	if after != "" {
		v.Set("after", after)
	}
	if len(v) > 0 {
		uri += "?" + v.Encode()
	}
	body, err := a.sess.RequestWithBucketID(http.MethodGet, uri, nil, discordgo.EndpointChannelMessages(channel), opts...)
	if err != nil {
		return nil, err
	}
	var raws []json.RawMessage
	if err := json.Unmarshal(body, &raws); err != nil {
		return nil, fmt.Errorf("decode messages: %w", err)
	}
	out := make([]*discordgo.Message, 0, len(raws))
	for _, raw := range raws {
		m, err := decodeMessage(raw)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

// channelMessage is discordgo's Session.ChannelMessage with titles read.
func (a *Adapter) channelMessage(channel, id string, opts ...discordgo.RequestOption) (*discordgo.Message, error) {
	body, err := a.sess.RequestWithBucketID(http.MethodGet, discordgo.EndpointChannelMessage(channel, id), nil, discordgo.EndpointChannelMessage(channel, ""), opts...)
	if err != nil {
		return nil, err
	}
	return decodeMessage(body)
}

func decodeMessage(raw []byte) (*discordgo.Message, error) {
	var m discordgo.Message
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("decode message: %w", err)
	}
	applyTitles(&m, raw)
	return &m, nil
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
