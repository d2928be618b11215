package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

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
// set, is where undeliverable messages wait for a retry; j, when set, names
// the channels gap fill reads after every IDENTIFY (discordGaps).
func addDiscord(set *surfaceSet, cfg config, rdb *goredis.Client, queue core.DeliveryQueue, j core.Journal, log *slog.Logger) error {
	if !discordConfigured(cfg.Getenv) {
		return nil
	}
	dcfg, err := discord.ConfigFromEnv(cfg.Getenv)
	if err != nil {
		return fmt.Errorf("discord configuration: %w", err)
	}
	// Told to stop, the adapter delivers what it had queued within half
	// the drain; the engine drains its runs in what is left (serve).
	dcfg.DrainTimeout = cfg.DrainTimeout / 2
	opts := []discord.Option{discord.WithLogger(log)}
	if queue != nil {
		// Discord never redelivers: a message the engine cannot take waits
		// in the journal's database and is retried for the approval TTL.
		opts = append(opts, discord.WithDeliveryQueue(queue, cfg.ApprovalTTL))
	}
	if j != nil {
		opts = append(opts, discord.WithGapSource(discordGaps{j: j}))
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

// discordGaps answers discord.GapSource from the journal's tail: the
// Discord channels (a thread is its own) of every post recent enough to
// hold an intent window open (Journal.PostsSince, with the messages those
// posts answered) and of every unfinished run (Journal.Unfinished), each
// with the message ids journaled there. Both are index reads bounded by the
// window horizon and the unfinished work, never a whole-journal fold, so a
// restarted process reads what was posted in its conversations while it
// was down.
type discordGaps struct {
	j core.Journal
}

func (g discordGaps) GapChannels(ctx context.Context) ([]discord.GapChannel, error) {
	since, err := windowHorizon(ctx, g.j, time.Now())
	if err != nil {
		return nil, fmt.Errorf("discord gap channels: %w", err)
	}
	posts, err := g.j.PostsSince(ctx, since)
	if err != nil {
		return nil, fmt.Errorf("discord gap channels: %w", err)
	}
	unfinished, err := g.j.Unfinished(ctx)
	if err != nil {
		return nil, fmt.Errorf("discord gap channels: %w", err)
	}
	var out []discord.GapChannel
	for _, c := range append(posts, unfinished...) {
		sc := c.Scope()
		if sc.Platform != discord.Platform || c.Redacted() {
			continue
		}
		id, err := journaledMessageID(c)
		if err != nil {
			return nil, fmt.Errorf("discord gap channels: %w", err)
		}
		if id == "" {
			continue
		}
		ch := sc.Thread // a Discord thread is a channel
		if ch == "" {
			ch = sc.Channel
		}
		out = append(out, discord.GapChannel{Channel: ch, After: id})
	}
	return out, nil
}

// journaledMessageID is the platform message id a command records: a
// message received or posted, or a run's trigger ("" for other kinds).
func journaledMessageID(c core.Command) (string, error) {
	switch c.Kind() {
	case core.KindMessageReceived:
		p, err := core.Decode[*core.MessageReceived](c)
		if err != nil {
			return "", err
		}
		return p.MessageID, nil
	case core.KindMessagePosted:
		p, err := core.Decode[*core.MessagePosted](c)
		if err != nil {
			return "", err
		}
		return p.MessageID, nil
	case core.KindRunStarted:
		p, err := core.Decode[*core.RunStarted](c)
		if err != nil {
			return "", err
		}
		return p.Trigger, nil
	}
	return "", nil
}
