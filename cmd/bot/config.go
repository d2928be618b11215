package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/engine"
)

// config is the bot's configuration, read from MARLOWE_* variables with an
// optional KEY=VALUE file underneath (MARLOWE_CONFIG).
type config struct {
	DataDir     string // MARLOWE_DATA_DIR
	DatabaseURL string // MARLOWE_DATABASE_URL: Postgres when set, else SQLite in DataDir
	RedisURL    string // MARLOWE_REDIS_URL
	SigningKey  string // MARLOWE_SIGNING_KEY: base64 ed25519 seed or private key
	VerifyKeys  string // MARLOWE_VERIFY_KEYS: retired base64 ed25519 public keys, comma-separated
	HTTPAddr    string // MARLOWE_HTTP_ADDR: health and metrics
	PublicURL   string // MARLOWE_PUBLIC_URL: the HTTP address as people reach it (export links); default browseURL(HTTPAddr)
	// PublicURLSet is true when MARLOWE_PUBLIC_URL was given (sign-in
	// redirects need an address people's browsers reach, not the default).
	PublicURLSet bool
	// SecretsKey seals per-person sign-ins at rest (MARLOWE_SECRETS_KEY:
	// base64 of 32 random bytes); SecretsKeyOld lists retired keys still
	// accepted for reading (MARLOWE_SECRETS_KEY_OLD, comma-separated).
	SecretsKey    string
	SecretsKeyOld string
	LogLevel      string // MARLOWE_LOG_LEVEL: debug, info, warn, error

	// Admins administer every channel of their platform (MARLOWE_ADMINS:
	// platform:userID, comma-separated).
	Admins []core.Operator
	// ApprovalTTL is how long an approval card stays answerable
	// (MARLOWE_APPROVAL_TTL, default 24h).
	ApprovalTTL time.Duration
	// MaxInputChars caps what a model sees of one message
	// (MARLOWE_MAX_INPUT_CHARS, default 8000).
	MaxInputChars int
	// Replica names this process in the lease table (MARLOWE_REPLICA_ID,
	// default host-pid-random); LeaseTTL is how long a dead replica's
	// channels wait before another takes them (MARLOWE_LEASE_TTL, default 10s).
	Replica  string
	LeaseTTL time.Duration
	// DrainTimeout is how long serve, told to stop, lets in-flight runs
	// finish or park before it closes (MARLOWE_DRAIN_TIMEOUT, default 20s).
	DrainTimeout time.Duration
	// Retention is how old a message text or tool payload may grow before
	// it is redacted (MARLOWE_RETENTION: 90d or a Go duration, at least 1h;
	// default off: 0).
	Retention time.Duration

	// Getenv reads the merged configuration (environment over file) for the
	// packages that read their own keys (model providers, platforms).
	Getenv func(string) string
}

// defaultDrainTimeout stays under the 30 s an orchestrator (Docker,
// Kubernetes) usually waits between SIGTERM and SIGKILL.
const defaultDrainTimeout = 20 * time.Second

// loadConfig merges the environment over the optional config file.
func loadConfig(getenv func(string) string) (config, error) {
	file := map[string]string{}
	if path := getenv("MARLOWE_CONFIG"); path != "" {
		var err error
		if file, err = readConfigFile(path); err != nil {
			return config{}, err
		}
	}
	get := func(k string) string {
		if v := getenv(k); v != "" {
			return v
		}
		return file[k]
	}
	or := func(v, def string) string {
		if v == "" {
			return def
		}
		return v
	}
	c := config{
		DataDir:       or(get("MARLOWE_DATA_DIR"), "./marlowe-data"),
		DatabaseURL:   get("MARLOWE_DATABASE_URL"),
		RedisURL:      get("MARLOWE_REDIS_URL"),
		SigningKey:    get("MARLOWE_SIGNING_KEY"),
		VerifyKeys:    get("MARLOWE_VERIFY_KEYS"),
		HTTPAddr:      or(get("MARLOWE_HTTP_ADDR"), "127.0.0.1:8081"),
		PublicURL:     get("MARLOWE_PUBLIC_URL"),
		SecretsKey:    get("MARLOWE_SECRETS_KEY"),
		SecretsKeyOld: get("MARLOWE_SECRETS_KEY_OLD"),
		LogLevel:      or(get("MARLOWE_LOG_LEVEL"), "info"),
		Getenv:        get,
	}
	for _, name := range []string{"MARLOWE_HTTP_ADDR", "MARLOWE_SANDBOX_ADDR"} {
		if err := checkListenAddr(name, get(name)); err != nil {
			return config{}, fmt.Errorf("config: %w", err)
		}
	}
	c.PublicURLSet = c.PublicURL != ""
	if c.PublicURL == "" {
		// As this machine reaches it: a wildcard host (":8081", as
		// compose sets it) is localhost, where compose publishes it.
		c.PublicURL = browseURL(c.HTTPAddr)
	}
	var err error
	if c.Admins, err = core.ParseOperators(get("MARLOWE_ADMINS")); err != nil {
		return config{}, fmt.Errorf("config: MARLOWE_ADMINS: %w", err)
	}
	c.ApprovalTTL = engine.DefaultApprovalTTL
	if v := get("MARLOWE_APPROVAL_TTL"); v != "" {
		d, err := parseDurationOrSeconds(v)
		if err != nil || d <= 0 {
			return config{}, fmt.Errorf("config: MARLOWE_APPROVAL_TTL=%q: want a positive Go duration (24h, 90m) or seconds", v)
		}
		c.ApprovalTTL = d
	}
	c.MaxInputChars = engine.DefaultMaxInputChars
	if v := get("MARLOWE_MAX_INPUT_CHARS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 100 {
			return config{}, fmt.Errorf("config: MARLOWE_MAX_INPUT_CHARS=%q: want a whole number of characters, at least 100", v)
		}
		c.MaxInputChars = n
	}
	c.Replica = get("MARLOWE_REPLICA_ID")
	c.LeaseTTL = core.DefaultLeaseTTL
	if v := get("MARLOWE_LEASE_TTL"); v != "" {
		d, err := parseDurationOrSeconds(v)
		if err != nil || d < time.Second {
			return config{}, fmt.Errorf("config: MARLOWE_LEASE_TTL=%q: want a Go duration (10s) or seconds, at least 1s", v)
		}
		c.LeaseTTL = d
	}
	c.DrainTimeout = defaultDrainTimeout
	if v := get("MARLOWE_DRAIN_TIMEOUT"); v != "" {
		d, err := parseDurationOrSeconds(v)
		if err != nil || d < 0 {
			return config{}, fmt.Errorf("config: MARLOWE_DRAIN_TIMEOUT=%q: want a Go duration (20s, 1m) or seconds; 0 closes at once", v)
		}
		c.DrainTimeout = d
	}
	if c.Retention, err = parseRetention(get("MARLOWE_RETENTION")); err != nil {
		return config{}, fmt.Errorf("config: %w", err)
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		return config{}, fmt.Errorf("config: MARLOWE_LOG_LEVEL=%q: want debug, info, warn or error", c.LogLevel)
	}
	return c, nil
}

// readConfigFile reads KEY=VALUE lines; blank lines and # comments are
// skipped, values may be quoted.
func readConfigFile(path string) (map[string]string, error) {
	f, err := os.Open(filepath.Clean(path))
	if err != nil {
		return nil, fmt.Errorf("config file: %w", err)
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		line = strings.TrimPrefix(line, "export ")
		k, v, ok := strings.Cut(line, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, fmt.Errorf("config file %s: line %d: want KEY=VALUE", path, n)
		}
		v = strings.TrimSpace(v)
		if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
			v = v[1 : len(v)-1]
		}
		out[k] = v
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("config file %s: %w", path, err)
	}
	return out, nil
}

// parseDurationOrSeconds reads a Go duration ("90s", "24h") or a bare
// number of seconds.
func parseDurationOrSeconds(s string) (time.Duration, error) {
	if n, err := strconv.Atoi(s); err == nil {
		return time.Duration(n) * time.Second, nil
	}
	return time.ParseDuration(s)
}
