package main

import (
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/adapters/slack/slackfake"
)

// waitEphemeral waits for a chat.postEphemeral the fake accepted.
func (b *qaBot) waitEphemeral(what string, match func(slackfake.Ephemeral) bool) slackfake.Ephemeral {
	b.t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		for _, e := range b.slack.Ephemerals() {
			if match(e) {
				return e
			}
		}
	}
	b.t.Fatalf("no ephemeral message for %s; ephemerals: %+v\nposts:\n%s", what, b.slack.Ephemerals(), b.dumpPosts())
	return slackfake.Ephemeral{}
}

// When Slack revokes the bot token, serve logs an error and /healthz says
// not ready, naming the event; before, it is ok.
func TestQASlackTokensRevokedMakesHealthNotReady(t *testing.T) {
	t.Parallel()
	b := startQA(t, qaOpts{http: true})
	health := func() (int, string) {
		t.Helper()
		r, err := http.Get(b.httpURL + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		defer r.Body.Close()
		body, _ := io.ReadAll(r.Body)
		return r.StatusCode, string(body)
	}
	if code, body := health(); code != 200 || strings.TrimSpace(body) != "ok" {
		t.Fatalf("healthz before = %d %q", code, body)
	}
	ev := b.slack.EventCallbackJSON("Ev0REVOKE1", map[string]any{"type": "tokens_revoked",
		"tokens": map[string]any{"bot": []string{b.slack.Config().BotUserID}}})
	if r := b.postSigned("/slack/events", "application/json", ev, time.Now(), qaSecret, nil); r.StatusCode != 200 {
		t.Fatalf("tokens_revoked event: %d", r.StatusCode)
	}
	code, body := health()
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "slack") || !strings.Contains(body, "tokens_revoked") {
		t.Fatalf("healthz after tokens_revoked = %d %q; want 503 naming slack and tokens_revoked", code, body)
	}
	if !regexp.MustCompile(`level=ERROR[^\n]*tokens_revoked`).MatchString(b.logs.String()) {
		t.Errorf("no error logged for tokens_revoked:\n%s", b.logs.String())
	}
}
