package slack

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/internal/filefetch"
)

var _ core.AttachmentFetcher = (*Adapter)(nil)

// fileHost is where Slack serves url_private_download.
const fileHost = "files.slack.com"

// FetchAttachment implements core.AttachmentFetcher: the file's
// url_private_download with the bot token (files:read), only from
// files.slack.com or the configured API URL's host (a local fake Slack),
// streamed to max bytes.
func (a *Adapter) FetchAttachment(ctx context.Context, att core.Attachment, max int64) ([]byte, error) {
	hosts := []string{fileHost}
	if u, err := url.Parse(a.cfg.APIURL); err == nil && u.Host != "" && a.cfg.APIURL != DefaultAPIURL {
		hosts = append(hosts, u.Host)
	}
	f := filefetch.Fetcher{Client: a.httpClient, Hosts: hosts}
	h := http.Header{"Authorization": {"Bearer " + a.cfg.BotToken}}
	b, err := f.Get(ctx, att.Ref, h, max)
	if err != nil {
		return nil, fmt.Errorf("slack: fetch file %s: %w", att.ID, err)
	}
	return b, nil
}
