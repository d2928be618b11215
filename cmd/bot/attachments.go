package main

import (
	"fmt"
	"log/slog"

	"github.com/marlowe-bot/marlowe/attachments"
	"github.com/marlowe-bot/marlowe/core"
)

// newAttachmentReader builds the reader of shared files from
// MARLOWE_ATTACHMENT_MAX_BYTES, MARLOWE_ATTACHMENT_MAX_COUNT,
// MARLOWE_MODEL_VISION and MARLOWE_TRANSCRIBE_*. With vision auto or on,
// images go to the model; one that refuses them is asked again without
// (the engine), so auto needs no probe at start.
func newAttachmentReader(cfg config, log *slog.Logger) (core.AttachmentReader, error) {
	ac, vision, err := attachments.ConfigFromEnv(cfg.Getenv)
	if err != nil {
		return nil, fmt.Errorf("attachments: %w", err)
	}
	ac.Images = vision != attachments.VisionOff
	ac.Log = log
	log.Info("attachments", "max_bytes", ac.MaxBytes, "max_count", ac.MaxCount, "vision", string(vision), "transcriber", ac.Transcriber != nil)
	return attachments.New(ac), nil
}
