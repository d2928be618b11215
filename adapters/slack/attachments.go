package slack

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/internal/filefetch"
)

var _ core.AttachmentFetcher = (*Adapter)(nil)

// fileHost is where Slack serves url_private_download.
const fileHost = "files.slack.com"

// FetchAttachment implements core.AttachmentFetcher: the file's
// url_private_download with the bot token (files:read), only from
// files.slack.com (through the egress transport) or the configured API
// URL's host (a local fake Slack), streamed to max bytes.
func (a *Adapter) FetchAttachment(ctx context.Context, att core.Attachment, max int64) ([]byte, error) {
	f := filefetch.Fetcher{Hosts: []string{fileHost}, Egress: a.files, Client: a.httpClient}
	if u, err := url.Parse(a.cfg.APIURL); err == nil && u.Host != "" && a.cfg.APIURL != DefaultAPIURL {
		f.Local = []string{u.Host}
	}
	h := http.Header{"Authorization": {"Bearer " + a.cfg.BotToken}}
	b, err := f.Get(ctx, att.Ref, h, max)
	if err != nil {
		return nil, fmt.Errorf("slack: fetch file %s: %w", att.ID, err)
	}
	if signInPage(b) && !strings.HasPrefix(att.Type, "text/html") {
		// Slack answers a token without files:read with its sign-in page
		// (200): never hand that to the model as the file.
		return nil, fmt.Errorf("slack: fetch file %s: Slack answered with its sign-in page: the app lacks the files:read scope (reinstall it with the manifest)", att.ID)
	}
	return b, nil
}

// signInPage reports whether b is an HTML page rather than a file.
func signInPage(b []byte) bool {
	head := strings.ToLower(strings.TrimSpace(string(b[:min(len(b), 256)])))
	return strings.HasPrefix(head, "<!doctype html") || strings.HasPrefix(head, "<html")
}
