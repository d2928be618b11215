package main

import (
	"io"
	"log/slog"
	"net/url"
)

// redactURL hides the password of a connection URL for logs.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparseable url)"
	}
	return u.Redacted()
}

func newLogger(w io.Writer, level string) *slog.Logger {
	var l slog.Level
	_ = l.UnmarshalText([]byte(level)) // validated by loadConfig
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l}))
}
