package slack

import (
	"context"
	"os"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/marlowe-bot/marlowe/adapters/slack/slackfake"
	"github.com/marlowe-bot/marlowe/core"
)

// TestSlackGuideMatchesManifestAndDoctor keeps docs/slack.md in step with
// what a newcomer sees (issue 36 item 11): every scope and event of the
// shipped manifest is named, the sample doctor output has the slack lines
// the doctor prints for an app installed from that manifest, in its order
// and words (the bot's identity aside), and the manifest's comments speak
// of /readyz as the guide does.
func TestSlackGuideMatchesManifestAndDoctor(t *testing.T) {
	guide, err := os.ReadFile("../../docs/slack.md")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile("../../deploy/slack/manifest.yml")
	if err != nil {
		t.Fatal(err)
	}
	doc := strings.Join(strings.Fields(string(guide)), " ")
	var m struct {
		OAuth struct {
			Scopes struct {
				Bot []string `yaml:"bot"`
			} `yaml:"scopes"`
		} `yaml:"oauth_config"`
		Settings struct {
			Events struct {
				Bot []string `yaml:"bot_events"`
			} `yaml:"event_subscriptions"`
		} `yaml:"settings"`
	}
	if err := yaml.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	if len(m.Settings.Events.Bot) == 0 || len(m.OAuth.Scopes.Bot) == 0 {
		t.Fatalf("manifest read no events or scopes: %+v", m)
	}
	for _, name := range append(m.Settings.Events.Bot, m.OAuth.Scopes.Bot...) {
		if !strings.Contains(doc, "`"+name+"`") {
			t.Errorf("docs/slack.md does not name the manifest's %s", name)
		}
	}
	if strings.Contains(string(raw), "/healthz") {
		t.Error("the manifest's comments say /healthz; the guide speaks of /readyz")
	}

	fake := slackfake.New(slackfake.Config{Scopes: append(RequiredScopes(), AgentScope)})
	defer fake.Close()
	a, _ := newAdapter(t, Config{BotToken: "xoxb-any", AppToken: "xapp-any", APIURL: fake.APIURL()})
	a.detectAgent(context.Background())
	var sample []string
	for _, l := range strings.Split(string(guide), "\n") {
		if strings.HasPrefix(l, "✓ slack ") {
			sample = append(sample, l)
		}
	}
	checks := a.Doctor(context.Background())
	if len(sample) != len(checks) {
		t.Fatalf("docs/slack.md shows %d slack doctor lines, the doctor prints %d: %q vs %+v", len(sample), len(checks), sample, checks)
	}
	for i, c := range checks {
		if c.Status != core.CheckOK {
			t.Fatalf("doctor against the manifest's scopes: %+v", c)
		}
		want := "✓ " + c.Name + ": " + c.Detail
		if c.Name == "slack bot token" {
			want = "✓ " + c.Name + ": connected as " // the identity is the sample's own
		}
		if !strings.HasPrefix(sample[i], want) {
			t.Errorf("docs/slack.md line %d = %q, the doctor says %q", i, sample[i], want)
		}
	}
}
