package main

import (
	"fmt"
	"log/slog"

	goredis "github.com/redis/go-redis/v9"

	"github.com/marlowe-bot/marlowe/adapters/discord"
	"github.com/marlowe-bot/marlowe/core"
	redisstore "github.com/marlowe-bot/marlowe/store/redis"
)

// discordConfigured reports whether the environment asks for Discord: its
// token, or one of its other settings (so a missing token is reported, not
// silently replaced by the sandbox).
func discordConfigured(getenv func(string) string) bool {
	for _, k := range []string{discord.EnvBotToken, discord.EnvAPIURL, discord.EnvPublicKey} {
		if getenv(k) != "" {
			return true
		}
	}
	return false
}

// addDiscord adds the Discord surface to set when it is configured, and its
// HTTP interactions endpoint when DISCORD_PUBLIC_KEY is set. queue, when
// set, is where undeliverable messages wait for a retry.
func addDiscord(set *surfaceSet, cfg config, rdb *goredis.Client, queue core.DeliveryQueue, log *slog.Logger) error {
	if !discordConfigured(cfg.Getenv) {
		return nil
	}
	dcfg, err := discord.ConfigFromEnv(cfg.Getenv)
	if err != nil {
		return fmt.Errorf("discord configuration: %w", err)
	}
	opts := []discord.Option{discord.WithLogger(log)}
	if queue != nil {
		// Discord never redelivers: a message the engine cannot take waits
		// in the journal's database and is retried for the approval TTL.
		opts = append(opts, discord.WithDeliveryQueue(queue, cfg.ApprovalTTL))
	}
	if rdb != nil {
		opts = append(opts, discord.WithDeduper(redisstore.NewDeduper(rdb, "marlowe:discord:")),
			// A slash command's token, for the replica that answers it
			// after the deferring one died.
			discord.WithInteractions(redisstore.NewKV(rdb, "marlowe:discord:i:")))
	}
	a, err := discord.New(dcfg, opts...)
	if err != nil {
		return fmt.Errorf("discord: %w", err)
	}
	set.byName[a.Name()] = a
	if h := a.Handler(); h != nil {
		set.discordHTTP = h
	}
	log.Info("discord configured", "interactions_endpoint", dcfg.PublicKey != "")
	return nil
}
