package main

import (
	"strings"
	"testing"

	"github.com/marlowe-bot/marlowe/adapters/slack/slackfake"
)

// TestModelErrorInChatNamesHostAndCause: a run broken by a wrong base URL
// says in the thread which endpoint refused and what to change.
func TestModelErrorInChatNamesHostAndCause(t *testing.T) {
	t.Parallel()
	base := ollamaLike(t)
	b := startQA(t, qaOpts{env: map[string]string{"MARLOWE_MODEL_BASE_URL": base}})
	b.slack.Say(qaGeneral, "", qaAlice, b.mention+" what's the status of release 1.4?")
	p := b.waitPost("the failure", func(p slackfake.Post) bool { return strings.Contains(p.Text, "refused the request") })
	host := strings.TrimPrefix(base, "http://")
	for _, want := range []string{"openai at " + host, "lacks the /v1 path", base + "/v1"} {
		if !strings.Contains(p.Text, want) {
			t.Errorf("chat message lacks %q:\n%s", want, p.Text)
		}
	}
}
