package main

import (
	"strings"
	"testing"
	"time"
)

// MARLOWE_RETENTION: days or Go durations, off by default; anything else
// stops `bot serve` before it starts, naming the variable.
func TestRetentionConfig(t *testing.T) {
	for v, want := range map[string]time.Duration{
		"": 0, "off": 0, "90d": 90 * 24 * time.Hour, "1d": 24 * time.Hour, "36h": 36 * time.Hour, " 2h30m ": 150 * time.Minute,
	} {
		cfg, err := loadConfig(env(map[string]string{"MARLOWE_DATA_DIR": t.TempDir(), "MARLOWE_RETENTION": v}))
		if err != nil || cfg.Retention != want {
			t.Errorf("MARLOWE_RETENTION=%q: %s %v, want %s", v, cfg.Retention, err, want)
		}
	}
	for _, v := range []string{"90", "ninety days", "-3d", "0d", "30m", "0", "1.5d", "90D", "d"} {
		if cfg, err := loadConfig(env(map[string]string{"MARLOWE_DATA_DIR": t.TempDir(), "MARLOWE_RETENTION": v})); err == nil || !strings.Contains(err.Error(), "MARLOWE_RETENTION") {
			t.Errorf("MARLOWE_RETENTION=%q: %s %v, want an error naming the variable", v, cfg.Retention, err)
		}
	}
	_, err := runBot(t, env(map[string]string{"MARLOWE_DATA_DIR": t.TempDir(), "MARLOWE_RETENTION": "ninety"}), "", "serve")
	if err == nil || !strings.Contains(err.Error(), `MARLOWE_RETENTION="ninety"`) {
		t.Errorf("bot serve with a bad MARLOWE_RETENTION: %v", err)
	}
}
