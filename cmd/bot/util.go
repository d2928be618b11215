package main

import (
	"io"
	"log/slog"
)

func newLogger(w io.Writer, level string) *slog.Logger {
	var l slog.Level
	_ = l.UnmarshalText([]byte(level)) // validated by loadConfig
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l}))
}
