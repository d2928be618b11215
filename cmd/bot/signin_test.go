package main

import (
	"strings"
	"testing"

	"github.com/marlowe-bot/marlowe/vault"
)

// doctor on the secrets key: off without one, a bad one named (never
// echoed), a good one with whether MARLOWE_PUBLIC_URL is set.
func TestDoctorSignIn(t *testing.T) {
	bad := "c2hvcnQ=" // "short"
	for _, tc := range []struct {
		name string
		vars map[string]string
		want string
	}{
		{"off", map[string]string{}, "✓ sign-in: off"},
		{"bad key", map[string]string{"MARLOWE_SECRETS_KEY": bad}, "✗ sign-in: MARLOWE_SECRETS_KEY: decodes to 5 bytes, want 32"},
		{"bad old key", map[string]string{"MARLOWE_SECRETS_KEY": vault.NewKey(), "MARLOWE_SECRETS_KEY_OLD": "nope!"}, "✗ sign-in: MARLOWE_SECRETS_KEY_OLD, key 1: not base64"},
		{"no public url", map[string]string{"MARLOWE_SECRETS_KEY": vault.NewKey()}, "MARLOWE_PUBLIC_URL is not set"},
		{"public url", map[string]string{"MARLOWE_SECRETS_KEY": vault.NewKey(), "MARLOWE_PUBLIC_URL": "https://marlowe.example"}, "redirect URI https://marlowe.example/connect/callback"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lines := doctorLines(t, tc.vars, "sign-in")
			if len(lines) != 1 || !strings.Contains(lines[0], tc.want) {
				t.Fatalf("doctor: %q, want %q", lines, tc.want)
			}
			if strings.Contains(lines[0], bad) {
				t.Errorf("doctor echoed the key: %s", lines[0])
			}
		})
	}
}
