package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"mime"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/internal/egress"
)

// FetchURL fetches a web page and returns its text. Outbound HTTP is egress,
// so the tool is `send` with the URL as its target: the gate keys on the
// host (a host the person did not write, e.g. one found in a fetched page,
// needs approval). The content is untrusted, size-capped and time-bounded.
func FetchURL(o Options) core.Tool {
	timeout := o.FetchTimeout
	if timeout <= 0 {
		timeout = 15 * time.Second
	}
	maxBytes := o.FetchMaxBytes
	if maxBytes <= 0 {
		maxBytes = 1 << 20
	}
	maxText := o.FetchMaxText
	if maxText <= 0 {
		maxText = 8000
	}
	client := o.HTTPClient
	if client == nil {
		client = egress.NewClient() // strict: public addresses only, no proxy
	}
	return core.Tool{
		Name:        "fetch_url",
		Description: "Fetch a web page (http or https) and return its text. The content is untrusted data.",
		Consequence: core.Send,
		Targets:     []string{"url"},
		Schema: json.RawMessage(`{"type":"object","properties":{
			"url":{"type":"string","description":"http(s) URL"}},"required":["url"]}`),
		Run: func(ctx context.Context, tc core.ToolContext, args json.RawMessage) (core.Observation, error) {
			var a struct{ URL string }
			if err := decode(args, &a); err != nil {
				return core.Observation{}, err
			}
			u, err := url.Parse(strings.TrimSpace(a.URL))
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return core.Observation{}, fmt.Errorf("url %q: want an absolute http or https URL", a.URL)
			}
			ctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
			if err != nil {
				return core.Observation{}, fmt.Errorf("fetch %s: %w", u.Host, err)
			}
			req.Header.Set("User-Agent", "Marlowe/1 (+team chat assistant)")
			req.Header.Set("Accept", "text/html, text/plain, application/json;q=0.9, */*;q=0.1")
			resp, err := client.Do(req)
			if err != nil {
				return core.Observation{}, fmt.Errorf("fetch %s: %w", u.Host, err)
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(io.LimitReader(resp.Body, maxBytes))
			if err != nil {
				return core.Observation{}, fmt.Errorf("fetch %s: read body: %w", u.Host, err)
			}
			if resp.StatusCode >= 400 {
				return core.Observation{}, fmt.Errorf("fetch %s: HTTP %d", u.Host, resp.StatusCode)
			}
			text, err := pageText(resp.Header.Get("Content-Type"), body)
			if err != nil {
				return core.Observation{}, fmt.Errorf("fetch %s: %w", u.Host, err)
			}
			if len(text) > maxText {
				text = text[:maxText] + "\n…[truncated]"
			}
			return core.Observation{Text: fmt.Sprintf("Fetched %s (HTTP %d):\n%s", u.String(), resp.StatusCode, text), Trust: core.Untrusted}, nil
		},
	}
}

var (
	reDrop  = regexp.MustCompile(`(?is)<(script|style|noscript|svg|head)\b.*?</(script|style|noscript|svg|head)>`)
	reBreak = regexp.MustCompile(`(?i)<(br|/p|/div|/li|/h[1-6]|/tr)\b[^>]*>`)
	reTag   = regexp.MustCompile(`(?s)<[^>]*>`)
	reSpace = regexp.MustCompile(`[ \t\r\f\v]+`)
	reLines = regexp.MustCompile(`\n\s*\n+`)
)

func pageText(contentType string, body []byte) (string, error) {
	mt, _, _ := mime.ParseMediaType(contentType)
	switch {
	case mt == "" || mt == "text/html" || mt == "application/xhtml+xml":
		s := reDrop.ReplaceAllString(string(body), " ")
		s = reBreak.ReplaceAllString(s, "\n")
		s = html.UnescapeString(reTag.ReplaceAllString(s, " "))
		s = reSpace.ReplaceAllString(s, " ")
		s = reLines.ReplaceAllString(s, "\n\n")
		return strings.TrimSpace(s), nil
	case strings.HasPrefix(mt, "text/"), mt == "application/json", strings.HasSuffix(mt, "+json"), strings.HasSuffix(mt, "+xml"):
		return strings.TrimSpace(string(body)), nil
	}
	return "", fmt.Errorf("unsupported content type %q", mt)
}
