package main

import (
	"fmt"
	"log/slog"
	"net/http"

	goredis "github.com/redis/go-redis/v9"

	"github.com/marlowe-bot/marlowe/adapters/telegram"
	"github.com/marlowe-bot/marlowe/attachments"
	redisstore "github.com/marlowe-bot/marlowe/store/redis"
)

// telegramConfigured reports whether the environment asks for Telegram:
// the token (which enables it) or any of its other settings, so a missing
// token is reported rather than silently replaced by the sandbox.
func telegramConfigured(getenv func(string) string) bool {
	for _, k := range []string{telegram.EnvBotToken, telegram.EnvMode, telegram.EnvWebhookSecret, telegram.EnvWebhookURL} {
		if getenv(k) != "" {
			return true
		}
	}
	return false
}

// addTelegram adds the Telegram surface when configured. Its HTTP handler
// (the webhook in webhook mode, /telegram/status always) is served on
// MARLOWE_HTTP_ADDR.
func addTelegram(set *surfaceSet, cfg config, rdb *goredis.Client, elect elector, files http.RoundTripper, log *slog.Logger) error {
	if !telegramConfigured(cfg.Getenv) {
		return nil
	}
	tcfg, err := telegram.ConfigFromEnv(cfg.Getenv)
	if err != nil {
		return fmt.Errorf("telegram configuration: %w", err)
	}
	opts := []telegram.Option{telegram.WithLogger(log), telegram.WithFileTransport(files)}
	if ac, _, err := attachments.ConfigFromEnv(cfg.Getenv); err == nil {
		// A photo is offered at its largest size under the cap.
		opts = append(opts, telegram.WithAttachmentMax(ac.MaxBytes))
	}
	if rdb != nil {
		// Shared update_id dedupe: a webhook retry reaching another replica,
		// or a restart, delivers once.
		opts = append(opts, telegram.WithDeduper(redisstore.NewDeduper(rdb, "marlowe:telegram:")))
	}
	if elect != nil {
		// One poller per token across replicas: the others wait for the
		// lease (it lapses after its holder stops renewing).
		opts = append(opts, telegram.WithLease(elect))
	}
	a, err := telegram.New(tcfg, opts...)
	if err != nil {
		return fmt.Errorf("telegram: %w", err)
	}
	set.byName[a.Name()] = a
	set.telegramHTTP = a.Handler()
	log.Info("telegram configured", "mode", tcfg.Mode)
	return nil
}
