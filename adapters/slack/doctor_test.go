package slack

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/marlowe-bot/marlowe/adapters/slack/slackfake"
	"github.com/marlowe-bot/marlowe/core"
)

// TestRequiredScopesMatchManifest: the scopes the doctor demands, and the
// optional agent scope, are the ones the shipped manifest grants, no more,
// no fewer.
func TestRequiredScopesMatchManifest(t *testing.T) {
	b, err := os.ReadFile("../../deploy/slack/manifest.yml")
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		OAuth struct {
			Scopes struct {
				Bot []string `yaml:"bot"`
			} `yaml:"scopes"`
		} `yaml:"oauth_config"`
	}
	if err := yaml.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	got, want := slices.Sorted(slices.Values(append(RequiredScopes(), AgentScope))), slices.Sorted(slices.Values(m.OAuth.Scopes.Bot))
	if len(want) == 0 || !slices.Equal(got, want) {
		t.Errorf("RequiredScopes = %v\nmanifest bot scopes = %v", got, want)
	}
}

func doctorLines(checks []core.Check) map[string]core.Check {
	out := map[string]core.Check{}
	for _, c := range checks {
		out[c.Name] = c
	}
	return out
}

func TestDoctor(t *testing.T) {
	all := RequiredScopes()
	cases := []struct {
		name  string
		fake  slackfake.Config
		cfg   func(c *Config)
		want  map[string]core.CheckStatus
		texts map[string]string // check name → substring of detail+fix
	}{
		{
			name: "healthy socket mode",
			fake: slackfake.Config{Scopes: all},
			want: map[string]core.CheckStatus{"slack bot token": core.CheckOK, "slack token scopes": core.CheckOK,
				"slack app token (socket mode)": core.CheckOK, "slack look-alike handles": core.CheckOK},
			texts: map[string]string{"slack bot token": "connected as @marlowe-fake (U0FAKEB0T1)"},
		},
		{
			name:  "missing scopes and a look-alike",
			fake:  slackfake.Config{Scopes: []string{"app_mentions:read", "chat:write", "users:read"}, Users: []slackfake.User{{ID: "U0IMPOSTOR", Name: "marlowe-fake"}}},
			want:  map[string]core.CheckStatus{"slack token scopes": core.CheckFail, "slack look-alike handles": core.CheckWarn},
			texts: map[string]string{"slack token scopes": "missing: channels:history, groups:history", "slack look-alike handles": "U0IMPOSTOR"},
		},
		{
			name:  "scopes not reported",
			fake:  slackfake.Config{},
			want:  map[string]core.CheckStatus{"slack token scopes": core.CheckWarn},
			texts: map[string]string{"slack token scopes": "did not report"},
		},
		{
			name:  "wrong bot token",
			fake:  slackfake.Config{BotToken: "xoxb-right", Scopes: all},
			cfg:   func(c *Config) { c.BotToken = "xoxb-wrong" },
			want:  map[string]core.CheckStatus{"slack bot token": core.CheckFail},
			texts: map[string]string{"slack bot token": "SLACK_BOT_TOKEN is wrong"},
		},
		{
			name:  "wrong app token",
			fake:  slackfake.Config{AppToken: "xapp-right", Scopes: all},
			cfg:   func(c *Config) { c.AppToken = "xapp-wrong" },
			want:  map[string]core.CheckStatus{"slack bot token": core.CheckOK, "slack app token (socket mode)": core.CheckFail},
			texts: map[string]string{"slack app token (socket mode)": "App-Level Tokens"},
		},
		{
			name: "http mode",
			fake: slackfake.Config{Scopes: all},
			cfg:  func(c *Config) { c.Mode, c.AppToken, c.SigningSecret = ModeHTTP, "", "s3cret" },
			want: map[string]core.CheckStatus{"slack events API (http mode)": core.CheckOK, "slack app token (socket mode)": ""},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fake := slackfake.New(tc.fake)
			defer fake.Close()
			cfg := Config{BotToken: "xoxb-any", AppToken: "xapp-any", APIURL: fake.APIURL()}
			if tc.cfg != nil {
				tc.cfg(&cfg)
			}
			a, _ := newAdapter(t, cfg)
			got := doctorLines(a.Doctor(context.Background()))
			for name, st := range tc.want {
				c, ok := got[name]
				if st == "" {
					if ok {
						t.Errorf("%s: unexpected check %+v", name, c)
					}
					continue
				}
				if !ok || c.Status != st {
					t.Errorf("%s = %+v, want status %s (all: %+v)", name, c, st, got)
				}
				if st != core.CheckOK && c.Fix == "" {
					t.Errorf("%s: %s without a fix", name, st)
				}
			}
			for name, sub := range tc.texts {
				if c := got[name]; !strings.Contains(c.Detail+" "+c.Fix, sub) {
					t.Errorf("%s = %+v, want %q in it", name, c, sub)
				}
			}
		})
	}
}
