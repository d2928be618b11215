package telegram

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Mode selects how Telegram reaches the bot.
type Mode string

const (
	// ModePolling long-polls getUpdates (the default: no public URL needed).
	// Exactly one poller may run per bot token.
	ModePolling Mode = "polling"
	// ModeWebhook receives updates as POST /telegram/webhook (see
	// Adapter.Handler); getUpdates is never called.
	ModeWebhook Mode = "webhook"
)

// DefaultAPIURL is the Bot API base; requests go to {base}/bot{token}/{method}.
const DefaultAPIURL = "https://api.telegram.org"

// Defaults for the knobs in Config.
const (
	DefaultPollTimeout    = 30 * time.Second
	DefaultDeliverTimeout = 30 * time.Second
	DefaultDedupeTTL      = 24 * time.Hour // Telegram keeps updates 24 h
	DefaultClaimTTL       = 60 * time.Second
	MaxMessageChars       = 4096 // UTF-16 code units, after entity parsing
)

// Environment variable names read by ConfigFromEnv.
const (
	EnvBotToken      = "TELEGRAM_BOT_TOKEN"
	EnvWebhookSecret = "TELEGRAM_WEBHOOK_SECRET"
	EnvAPIURL        = "MARLOWE_TELEGRAM_API_URL"
	EnvMode          = "MARLOWE_TELEGRAM_MODE"
	EnvWebhookURL    = "MARLOWE_TELEGRAM_WEBHOOK_URL"
	// EnvPrivateChats lists chat ids (comma-separated) an operator declares
	// private: groups are public otherwise (ARCHITECTURE.md section 5).
	EnvPrivateChats = "MARLOWE_TELEGRAM_PRIVATE_CHATS"
)

// Config is the Telegram adapter's configuration.
type Config struct {
	// BotToken from @BotFather, TELEGRAM_BOT_TOKEN. Required.
	BotToken string
	// Mode is polling (default) or webhook, MARLOWE_TELEGRAM_MODE.
	Mode Mode
	// APIURL replaces https://api.telegram.org, MARLOWE_TELEGRAM_API_URL.
	APIURL string
	// WebhookSecret is compared (constant time) with the
	// X-Telegram-Bot-Api-Secret-Token header, TELEGRAM_WEBHOOK_SECRET.
	// Required in webhook mode: 1-256 of A-Z a-z 0-9 _ -.
	WebhookSecret string
	// WebhookURL, when set, is registered with setWebhook (with the
	// secret) at start, MARLOWE_TELEGRAM_WEBHOOK_URL. Unset: the operator
	// registers the webhook; the bot never calls setWebhook.
	WebhookURL string
	// PrivateChats are chat ids treated as private (no untagged follow-ups).
	PrivateChats []int64

	// PollTimeout is getUpdates' long-poll timeout.
	PollTimeout time.Duration
	// DeliverTimeout bounds one deliver call.
	DeliverTimeout time.Duration
	// DedupeTTL is how long a delivered update_id is remembered.
	DedupeTTL time.Duration
	// ClaimTTL is how long an in-flight delivery claim holds.
	ClaimTTL time.Duration
}

var secretRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,256}$`)

// ConfigFromEnv reads the configuration through getenv (pass os.Getenv).
// Missing values are reported by Validate.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	cfg := Config{
		BotToken:      strings.TrimSpace(getenv(EnvBotToken)),
		WebhookSecret: strings.TrimSpace(getenv(EnvWebhookSecret)),
		APIURL:        strings.TrimSpace(getenv(EnvAPIURL)),
		Mode:          Mode(strings.ToLower(strings.TrimSpace(getenv(EnvMode)))),
		WebhookURL:    strings.TrimSpace(getenv(EnvWebhookURL)),
	}
	if cfg.Mode == "" {
		cfg.Mode = ModePolling
	}
	for _, f := range strings.FieldsFunc(getenv(EnvPrivateChats), func(r rune) bool { return r == ',' || r == ' ' }) {
		id, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return Config{}, fmt.Errorf("telegram: %s: %q is not a chat id", EnvPrivateChats, f)
		}
		cfg.PrivateChats = append(cfg.PrivateChats, id)
	}
	return cfg, cfg.Validate()
}

// Validate reports what is missing or malformed, naming the variable to set.
// It never prints a token or secret.
func (c Config) Validate() error {
	var errs []error
	switch {
	case c.BotToken == "":
		errs = append(errs, fmt.Errorf("%s is not set: create a bot with @BotFather (/newbot) and copy its token", EnvBotToken))
	case !tokenShape(c.BotToken):
		errs = append(errs, fmt.Errorf("%s does not look like a bot token (want <digits>:<secret>, as @BotFather prints it)", EnvBotToken))
	}
	switch c.Mode {
	case "", ModePolling:
	case ModeWebhook:
		if c.WebhookSecret == "" {
			errs = append(errs, fmt.Errorf("%s is not set: webhook mode refuses every request without it (choose 1-256 of A-Z a-z 0-9 _ -)", EnvWebhookSecret))
		}
	default:
		errs = append(errs, fmt.Errorf("%s=%q: want %q or %q", EnvMode, c.Mode, ModePolling, ModeWebhook))
	}
	if c.WebhookSecret != "" && !secretRE.MatchString(c.WebhookSecret) {
		errs = append(errs, fmt.Errorf("%s: Telegram accepts 1-256 characters of A-Z a-z 0-9 _ -", EnvWebhookSecret))
	}
	if c.WebhookURL != "" {
		if c.Mode != ModeWebhook {
			errs = append(errs, fmt.Errorf("%s is set but %s is not %q", EnvWebhookURL, EnvMode, ModeWebhook))
		}
		if u, err := url.Parse(c.WebhookURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			errs = append(errs, fmt.Errorf("%s=%q: want an absolute URL ending in /telegram/webhook", EnvWebhookURL, c.WebhookURL))
		}
	}
	if c.APIURL != "" {
		if _, err := normaliseAPIURL(c.APIURL); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", EnvAPIURL, err))
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("telegram config: %w", errors.Join(errs...))
}

func (c Config) withDefaults() Config {
	if c.Mode == "" {
		c.Mode = ModePolling
	}
	if c.APIURL == "" {
		c.APIURL = DefaultAPIURL
	}
	c.APIURL, _ = normaliseAPIURL(c.APIURL)
	if c.PollTimeout <= 0 {
		c.PollTimeout = DefaultPollTimeout
	}
	if c.DeliverTimeout <= 0 {
		c.DeliverTimeout = DefaultDeliverTimeout
	}
	if c.DedupeTTL <= 0 {
		c.DedupeTTL = DefaultDedupeTTL
	}
	if c.ClaimTTL <= 0 {
		c.ClaimTTL = DefaultClaimTTL
	}
	return c
}

// tokenShape checks "<bot id>:<secret>" without judging the secret.
func tokenShape(tok string) bool {
	id, secret, ok := strings.Cut(tok, ":")
	if !ok || id == "" || len(secret) < 10 || strings.ContainsAny(tok, " \t\n/") {
		return false
	}
	_, err := strconv.ParseInt(id, 10, 64)
	return err == nil
}

// normaliseAPIURL checks an absolute http(s) URL and drops trailing slashes.
func normaliseAPIURL(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("parse %q: %w", raw, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("%q: want an absolute http(s) URL such as %s", raw, DefaultAPIURL)
	}
	return strings.TrimRight(raw, "/"), nil
}
