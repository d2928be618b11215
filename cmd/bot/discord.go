package main

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
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
func addDiscord(set *surfaceSet, cfg config, rdb *goredis.Client, queue core.DeliveryQueue, j core.Journal, files http.RoundTripper, log *slog.Logger) error {
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
	opts := []discord.Option{discord.WithLogger(log), discord.WithFileTransport(files)}
	if queue != nil {
		// Discord never redelivers: a message the engine cannot take waits
		// in the journal's database and is retried for the approval TTL.
		opts = append(opts, discord.WithDeliveryQueue(queue, cfg.ApprovalTTL))
	}
	if j != nil {
		opts = append(opts, discord.WithGapSource(discordGaps{j: j, horizon: cmp.Or(dcfg.GapHorizon, discord.DefaultGapHorizon)}))
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

// discordGaps answers discord.GapSource from the journal: every Discord
// channel (a thread is its own) with unfinished work (Journal.Unfinished),
// with a post recent enough to hold an intent window open
// (Journal.PostsSince, with the messages those posts answered), and, from
// a store that can say (recentPoster), with a post of the bot's within
// horizon: the channels it was in a conversation in, quiet ones included,
// so a new mention there while no process ran is still read. Each comes
// with the message ids journaled there, most urgent first. All are index
// reads bounded by the unfinished work, the window or horizon and
// discordGapPosts, never a whole-journal fold; being the journal, they
// survive a restart and are the same on every replica.
type discordGaps struct {
	j       core.Journal
	horizon time.Duration
}

// discordGapPosts bounds the recent conversations one gap fill reads
// (the adapter reads at most 200 channels).
const discordGapPosts = 200

// recentPoster lists the newest post of each conversation of a platform
// since a time (store/postgres, store/sqlite).
type recentPoster interface {
	RecentPosts(ctx context.Context, platform string, since time.Time, limit int) ([]core.Command, error)
}

func (g discordGaps) GapChannels(ctx context.Context) ([]discord.GapChannel, error) {
	now := time.Now()
	since, err := windowHorizon(ctx, g.j, now)
	if err != nil {
		return nil, fmt.Errorf("discord gap channels: %w", err)
	}
	unfinished, err := g.j.Unfinished(ctx)
	if err != nil {
		return nil, fmt.Errorf("discord gap channels: %w", err)
	}
	posts, err := g.j.PostsSince(ctx, since)
	if err != nil {
		return nil, fmt.Errorf("discord gap channels: %w", err)
	}
	var recent []core.Command
	if rp, ok := g.j.(recentPoster); ok && g.horizon > 0 {
		if recent, err = rp.RecentPosts(ctx, discord.Platform, now.Add(-g.horizon), discordGapPosts); err != nil {
			return nil, fmt.Errorf("discord gap channels: %w", err)
		}
	}
	var out []discord.GapChannel
	for _, c := range slices.Concat(unfinished, posts, recent) {
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
		if sc.Thread == "" {
			out = append(out, discord.GapChannel{Channel: sc.Channel, After: id})
			continue
		}
		// A Discord thread is a channel; its parent is read too (a new
		// mention there opens a new thread), after the thread's root,
		// which was posted there.
		out = append(out, discord.GapChannel{Channel: sc.Thread, After: id},
			discord.GapChannel{Channel: sc.Channel, After: sc.Thread})
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
