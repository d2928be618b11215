package main

import (
	"io"
	"log/slog"

	"github.com/marlowe-bot/marlowe/internal/telemetry"
)

func newLogger(w io.Writer, level string) *slog.Logger {
	var l slog.Level
	_ = l.UnmarshalText([]byte(level)) // validated by loadConfig
	// Records logged with a traced context carry trace_id and span_id.
	return slog.New(telemetry.LogHandler(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l})))
}
