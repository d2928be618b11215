package slack

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// Mode selects how Slack reaches the bot.
type Mode string

const (
	// ModeSocket receives over Socket Mode (an outbound WebSocket opened with
	// the app-level token). The default: no public URL is needed.
	ModeSocket Mode = "socket"
	// ModeHTTP receives over the Events API: Slack POSTs signed requests to
	// /slack/events and /slack/interactions (see Adapter.Handler).
	ModeHTTP Mode = "http"
)

// DefaultAPIURL is Slack's Web API base URL (with its trailing slash).
const DefaultAPIURL = "https://slack.com/api/"

// Defaults for the timing knobs in Config.
const (
	DefaultAckTimeout      = 2500 * time.Millisecond
	DefaultDedupeTTL       = 15 * time.Minute
	DefaultClaimTTL        = 30 * time.Second
	DefaultDrainTimeout    = 10 * time.Second
	DefaultMaxMessageChars = 3500
	minDedupeTTL           = 10 * time.Minute
)

// Config is the Slack adapter's configuration. ConfigFromEnv fills it from
// the environment; zero durations mean the defaults above.
type Config struct {
	// BotToken is the bot user OAuth token (xoxb-…), SLACK_BOT_TOKEN. Required.
	BotToken string
	// AppToken is the app-level token (xapp-…) with connections:write,
	// SLACK_APP_TOKEN. Required in socket mode.
	AppToken string
	// SigningSecret verifies Events API requests (signature v0),
	// SLACK_SIGNING_SECRET. Required in http mode.
	SigningSecret string
	// Mode is socket (default) or http, MARLOWE_SLACK_MODE.
	Mode Mode
	// APIURL is the Web API base URL, MARLOWE_SLACK_API_URL; default
	// https://slack.com/api/. A trailing slash is added when missing. Socket
	// Mode's apps.connections.open goes through it too, so a Slack-compatible
	// fake can serve everything.
	APIURL string

	// AckTimeout bounds how long an inbound event waits for deliver before it
	// is left unacknowledged (Slack redelivers). Must stay under Slack's 3 s.
	AckTimeout time.Duration
	// DedupeTTL is how long a delivered (team, channel, ts) is remembered
	// (at least 10 minutes; Slack's last retry comes about 5 minutes late).
	DedupeTTL time.Duration
	// ClaimTTL is how long an in-flight delivery claim holds before another
	// delivery of the same message may take over (a crashed replica).
	ClaimTTL time.Duration
	// DrainTimeout is how long Run, told to stop, still delivers and
	// acknowledges the Socket Mode envelopes queued in its lanes (as
	// Discord's does); what is left then stays unacknowledged and Slack
	// redelivers it, deduplicated. Default 10 s.
	DrainTimeout time.Duration
	// MaxMessageChars is the longest text sent in one message; longer answers
	// are split into several posts. Slack truncates at 40,000 and renders best
	// under 4,000.
	MaxMessageChars int
}

// Environment variable names read by ConfigFromEnv.
const (
	EnvBotToken      = "SLACK_BOT_TOKEN"
	EnvAppToken      = "SLACK_APP_TOKEN"
	EnvSigningSecret = "SLACK_SIGNING_SECRET"
	EnvMode          = "MARLOWE_SLACK_MODE"
	EnvAPIURL        = "MARLOWE_SLACK_API_URL"
)

// ConfigFromEnv reads the adapter's configuration through getenv (pass
// os.Getenv). It reports a malformed value; missing tokens are reported by
// Validate (and so by New), where the mode is known.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	cfg := Config{
		BotToken:      strings.TrimSpace(getenv(EnvBotToken)),
		AppToken:      strings.TrimSpace(getenv(EnvAppToken)),
		SigningSecret: strings.TrimSpace(getenv(EnvSigningSecret)),
		Mode:          Mode(strings.ToLower(strings.TrimSpace(getenv(EnvMode)))),
		APIURL:        strings.TrimSpace(getenv(EnvAPIURL)),
	}
	switch cfg.Mode {
	case "":
		cfg.Mode = ModeSocket
	case ModeSocket, ModeHTTP:
	default:
		return Config{}, fmt.Errorf("slack: %s=%q: want %q or %q", EnvMode, cfg.Mode, ModeSocket, ModeHTTP)
	}
	if cfg.APIURL != "" {
		if _, err := normaliseAPIURL(cfg.APIURL); err != nil {
			return Config{}, fmt.Errorf("slack: %s: %w", EnvAPIURL, err)
		}
	}
	return cfg, nil
}

// Validate reports what is missing or malformed, naming the variable to set.
func (c Config) Validate() error {
	var errs []error
	switch {
	case c.BotToken == "":
		errs = append(errs, fmt.Errorf("%s is not set: copy the Bot User OAuth Token (xoxb-…) from the app's OAuth & Permissions page", EnvBotToken))
	case !strings.HasPrefix(c.BotToken, "xoxb-"):
		errs = append(errs, fmt.Errorf("%s does not look like a bot token (want xoxb-…; an xapp- token belongs in %s)", EnvBotToken, EnvAppToken))
	}
	mode := c.Mode
	if mode == "" {
		mode = ModeSocket
	}
	switch mode {
	case ModeSocket:
		switch {
		case c.AppToken == "":
			errs = append(errs, fmt.Errorf("%s is not set: socket mode needs an app-level token (xapp-…) with connections:write, from Basic Information → App-Level Tokens (or set %s=http)", EnvAppToken, EnvMode))
		case !strings.HasPrefix(c.AppToken, "xapp-"):
			errs = append(errs, fmt.Errorf("%s does not look like an app-level token (want xapp-…)", EnvAppToken))
		}
	case ModeHTTP:
		if c.SigningSecret == "" {
			errs = append(errs, fmt.Errorf("%s is not set: http mode verifies every request with the Signing Secret from Basic Information → App Credentials", EnvSigningSecret))
		}
	default:
		errs = append(errs, fmt.Errorf("%s=%q: want %q or %q", EnvMode, c.Mode, ModeSocket, ModeHTTP))
	}
	if c.APIURL != "" {
		if _, err := normaliseAPIURL(c.APIURL); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", EnvAPIURL, err))
		}
	}
	if c.AckTimeout < 0 || c.AckTimeout >= 3*time.Second {
		errs = append(errs, fmt.Errorf("ack timeout %v: must be under Slack's 3 s", c.AckTimeout))
	}
	if c.DedupeTTL != 0 && c.DedupeTTL < minDedupeTTL {
		errs = append(errs, fmt.Errorf("dedupe TTL %v: must be at least %v (Slack retries up to about 5 minutes late)", c.DedupeTTL, minDedupeTTL))
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("slack config: %w", errors.Join(errs...))
}

func (c Config) withDefaults() Config {
	if c.Mode == "" {
		c.Mode = ModeSocket
	}
	if c.APIURL == "" {
		c.APIURL = DefaultAPIURL
	}
	c.APIURL, _ = normaliseAPIURL(c.APIURL)
	if c.AckTimeout == 0 {
		c.AckTimeout = DefaultAckTimeout
	}
	if c.DedupeTTL == 0 {
		c.DedupeTTL = DefaultDedupeTTL
	}
	if c.ClaimTTL <= 0 {
		c.ClaimTTL = DefaultClaimTTL
	}
	if c.DrainTimeout <= 0 {
		c.DrainTimeout = DefaultDrainTimeout
	}
	if c.MaxMessageChars <= 0 {
		c.MaxMessageChars = DefaultMaxMessageChars
	}
	if c.MaxMessageChars > 39000 {
		c.MaxMessageChars = 39000
	}
	return c
}

// normaliseAPIURL checks an absolute http(s) URL and gives it the trailing
// slash slack-go needs (it appends method names directly).
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
