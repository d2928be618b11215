package discord

import (
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// DefaultAPIURL is Discord's REST base, the prefix discordgo's endpoint
// variables are built on (with its trailing slash).
const DefaultAPIURL = "https://discord.com/api/v10/"

// Environment variable names read by ConfigFromEnv.
const (
	EnvBotToken  = "DISCORD_BOT_TOKEN"
	EnvAPIURL    = "MARLOWE_DISCORD_API_URL"
	EnvPublicKey = "DISCORD_PUBLIC_KEY"
)

// Defaults for the knobs in Config.
const (
	DefaultAckTimeout      = 2500 * time.Millisecond
	DefaultDedupeTTL       = 30 * time.Minute
	DefaultClaimTTL        = 30 * time.Second
	DefaultMaxMessageChars = 2000
	DefaultGapHorizon      = 7 * 24 * time.Hour
	DefaultGapMaxAge       = 20 * time.Minute // core.DefaultThreadWindow
)

// Config is the Discord adapter's configuration.
type Config struct {
	// BotToken is the bot token from the developer portal (Bot → Token),
	// DISCORD_BOT_TOKEN. Required. A leading "Bot " is accepted and ignored.
	BotToken string
	// APIURL replaces the REST base https://discord.com/api/v10/,
	// MARLOWE_DISCORD_API_URL. The gateway URL is read from
	// GET {APIURL}gateway/bot, so a Discord-compatible server on this base
	// serves the whole bot.
	APIURL string
	// PublicKey (hex) enables the HTTP interactions endpoint
	// /discord/interactions, DISCORD_PUBLIC_KEY; requests are Ed25519
	// verified.
	PublicKey string

	// AckTimeout bounds how long a button click waits for deliver before
	// its interaction is acknowledged anyway (Discord allows 3 s).
	AckTimeout time.Duration
	// DedupeTTL is how long a delivered message id is remembered.
	DedupeTTL time.Duration
	// ClaimTTL is how long an in-flight delivery claim holds.
	ClaimTTL time.Duration
	// MaxMessageChars is the longest content sent in one message (Discord's
	// limit is 2,000).
	MaxMessageChars int
	// GapHorizon is how long after the bot last took part in a channel
	// (posted, or was mentioned, replied to or DMed there) a new session
	// reads what was posted there meanwhile (gap.go; cmd/bot asks the
	// journal for the channels the bot posted in within it). Default 7 days.
	GapHorizon time.Duration
	// GapMaxAge is the age past which a message found by gap fill is not
	// delivered: it would be answered too late (default the thread window).
	GapMaxAge time.Duration
	// DrainTimeout is how long Run, told to stop, still delivers the
	// messages it had queued (Discord never sends them again). Default 10 s.
	DrainTimeout time.Duration
}

// ConfigFromEnv reads the configuration through getenv (pass os.Getenv).
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	cfg := Config{
		BotToken:  strings.TrimSpace(getenv(EnvBotToken)),
		APIURL:    strings.TrimSpace(getenv(EnvAPIURL)),
		PublicKey: strings.TrimSpace(getenv(EnvPublicKey)),
	}
	return cfg, cfg.Validate()
}

// Validate reports what is missing or malformed, naming the variable.
func (c Config) Validate() error {
	var errs []error
	tok := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(c.BotToken), "Bot "))
	if tok == "" {
		errs = append(errs, fmt.Errorf("%s is not set: copy the token from the application's Bot page in the Discord developer portal", EnvBotToken))
	} else if strings.ContainsAny(tok, " \t\n") {
		errs = append(errs, fmt.Errorf("%s contains whitespace: paste the token alone", EnvBotToken))
	}
	if c.APIURL != "" {
		if _, err := normaliseAPIURL(c.APIURL); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", EnvAPIURL, err))
		}
	}
	if c.PublicKey != "" {
		if _, err := parsePublicKey(c.PublicKey); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", EnvPublicKey, err))
		}
	}
	if c.AckTimeout < 0 || c.AckTimeout >= 3*time.Second {
		errs = append(errs, fmt.Errorf("ack timeout %v: must be under Discord's 3 s", c.AckTimeout))
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("discord config: %w", errors.Join(errs...))
}

func (c Config) withDefaults() Config {
	c.BotToken = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(c.BotToken), "Bot "))
	if c.APIURL == "" {
		c.APIURL = DefaultAPIURL
	}
	c.APIURL, _ = normaliseAPIURL(c.APIURL)
	if c.AckTimeout == 0 {
		c.AckTimeout = DefaultAckTimeout
	}
	if c.DedupeTTL <= 0 {
		c.DedupeTTL = DefaultDedupeTTL
	}
	if c.ClaimTTL <= 0 {
		c.ClaimTTL = DefaultClaimTTL
	}
	if c.GapHorizon <= 0 {
		c.GapHorizon = DefaultGapHorizon
	}
	if c.GapMaxAge <= 0 {
		c.GapMaxAge = DefaultGapMaxAge
	}
	if c.MaxMessageChars <= 0 || c.MaxMessageChars > 2000 {
		c.MaxMessageChars = DefaultMaxMessageChars
	}
	if c.DrainTimeout <= 0 {
		c.DrainTimeout = 10 * time.Second
	}
	return c
}

// normaliseAPIURL checks an absolute http(s) URL and gives it a trailing
// slash (endpoints are appended to it).
func normaliseAPIURL(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("parse %q: %w", raw, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("%q: want an absolute http(s) URL such as %s", raw, DefaultAPIURL)
	}
	if !strings.HasSuffix(raw, "/") {
		raw += "/"
	}
	return raw, nil
}

func parsePublicKey(s string) (ed25519.PublicKey, error) {
	b, err := hex.DecodeString(strings.TrimSpace(s))
	if err != nil || len(b) != ed25519.PublicKeySize {
		return nil, errors.New("want the application's public key: 64 hex characters from General Information")
	}
	return ed25519.PublicKey(b), nil
}
