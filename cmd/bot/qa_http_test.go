package main

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/adapters/slack/slackfake"
	"github.com/marlowe-bot/marlowe/llm/llmtest"
)

// qaHTTPMode drives the Events API endpoints of `bot serve` in
// MARLOWE_SLACK_MODE=http: the url_verification handshake, signature and
// timestamp checks, an event answered in its thread, Slack's retry of it,
// malformed events, and approval clicks at /slack/interactions.
func qaHTTPMode(t *testing.T) {
	b := startQA(t, qaOpts{http: true})
	const jsonCT = "application/json"
	now := time.Now()

	// url_verification, answered with the challenge.
	body := []byte(`{"token":"tok","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}`)
	req, _ := slackfake.SignedRequest(b.httpURL+"/slack/events", qaSecret, now, jsonCT, body)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(res.Body)
	res.Body.Close()
	var ch struct{ Challenge string }
	if res.StatusCode != 200 || json.Unmarshal(got, &ch) != nil || ch.Challenge != "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P" {
		t.Fatalf("url_verification: %d %s", res.StatusCode, got)
	}

	ts := b.slack.AddMessage(qaGeneral, "", qaAlice, b.mention+" httpkiwi")
	evBody := b.slack.EventCallbackJSON("Ev0HTTP0001", b.slack.MessageEvent(qaGeneral, qaAlice, b.mention+" httpkiwi", ts, ""))

	// Forged: wrong secret; stale: a valid signature 6 minutes old; none.
	if r := b.postSigned("/slack/events", jsonCT, evBody, now, "not-the-secret", nil); r.StatusCode != http.StatusUnauthorized {
		t.Fatalf("forged signature: %d, want 401", r.StatusCode)
	}
	if r := b.postSigned("/slack/events", jsonCT, evBody, now.Add(-6*time.Minute), qaSecret, nil); r.StatusCode != http.StatusUnauthorized {
		t.Fatalf("stale timestamp: %d, want 401", r.StatusCode)
	}
	if r := b.postSigned("/slack/events", jsonCT, evBody, now.Add(6*time.Minute), qaSecret, nil); r.StatusCode != http.StatusUnauthorized {
		t.Fatalf("future timestamp: %d, want 401", r.StatusCode)
	}
	unsigned, _ := http.NewRequest(http.MethodPost, b.httpURL+"/slack/events", strings.NewReader(string(evBody)))
	unsigned.Header.Set("Content-Type", jsonCT)
	if r, err := http.DefaultClient.Do(unsigned); err != nil || r.StatusCode != http.StatusUnauthorized {
		t.Fatalf("unsigned: %v %v, want 401", r, err)
	}
	// A signature over another body.
	tsh, sig := slackfake.Sign(qaSecret, now, []byte(`{"type":"event_callback"}`))
	if r := b.postSigned("/slack/events", jsonCT, evBody, now, qaSecret, map[string]string{"X-Slack-Request-Timestamp": tsh, "X-Slack-Signature": sig}); r.StatusCode != http.StatusUnauthorized {
		t.Fatalf("signature of another body: %d, want 401", r.StatusCode)
	}
	time.Sleep(300 * time.Millisecond)
	if n := len(b.slack.Posts()); n != 0 {
		t.Fatalf("a rejected request was acted on:\n%s", b.dumpPosts())
	}

	// The valid event, then Slack's retries of it.
	if r := b.postSigned("/slack/events", jsonCT, evBody, now, qaSecret, nil); r.StatusCode != 200 {
		t.Fatalf("valid event: %d", r.StatusCode)
	}
	p := b.waitPost("answer over HTTP", saidTo("httpkiwi"))
	if p.ThreadTS != ts {
		t.Fatalf("answered in %q, want %s", p.ThreadTS, ts)
	}
	for i := 1; i <= 2; i++ {
		r := b.postSigned("/slack/events", jsonCT, evBody, time.Now(), qaSecret, map[string]string{"X-Slack-Retry-Num": itoa(uint64(i)), "X-Slack-Retry-Reason": "http_timeout"})
		if r.StatusCode != 200 {
			t.Fatalf("retry %d: %d", i, r.StatusCode)
		}
	}
	// And the app_mention twin.
	amBody := b.slack.EventCallbackJSON("Ev0HTTP0002", b.slack.AppMentionEvent(qaGeneral, qaAlice, b.mention+" httpkiwi", ts, ""))
	if r := b.postSigned("/slack/events", jsonCT, amBody, time.Now(), qaSecret, nil); r.StatusCode != 200 {
		t.Fatalf("app_mention twin: %d", r.StatusCode)
	}
	time.Sleep(700 * time.Millisecond)
	if n := b.count(saidTo("httpkiwi")); n != 1 {
		t.Fatalf("answered %d times", n)
	}

	// Malformed but signed events are acknowledged (200), not retried forever.
	for _, raw := range []string{
		`{"type":"event_callback","team_id":"T0FAKE0001","event":{"type":"message"}}`,
		`{"type":"event_callback","team_id":"T0FAKE0001","event":{"type":"message","subtype":"message_deleted","channel":"` + qaGeneral + `","channel_type":"channel","ts":"1700000000.000100","deleted_ts":"` + ts + `"}}`,
		`{"type":"event_callback","team_id":"T0FAKE0001","event":{"type":"message","channel":"` + qaGeneral + `","channel_type":"channel","ts":"1700000000.000101","text":"no user"}}`,
		`{"type":"event_callback","team_id":"T0FAKE0001","event":{"type":"team_join","user":{"id":"U0NEW"}}}`,
		`{"type":"event_callback","team_id":"T0FAKE0001","event":{"type":"totally_new_event"}}`,
		`{"type":"event_callback"}`,
		`{"type":"app_rate_limited","team_id":"T0FAKE0001","minute_rate_limited":1518467820,"api_app_id":"A0FAKE0001"}`,
		`{"type":"something_else"}`,
		`not json at all`,
		`{"type":"event_callback","event":"a string"}`,
		`{"type":"event_callback","event":{"type":"message","channel":5,"ts":[]}}`,
		``,
	} {
		if r := b.postSigned("/slack/events", jsonCT, []byte(raw), time.Now(), qaSecret, nil); r.StatusCode != 200 {
			t.Errorf("signed malformed event %s: %d, want 200", raw, r.StatusCode)
		}
	}

	// Interactions: an approval card, a forged click, the real click.
	b.model.Enqueue(
		llmtest.Tools(llmtest.Call("c1", "post_to_channel", `{"channel":"`+qaOther+`","text":"httpcard report"}`)),
		llmtest.Text("httpcard shared"),
	)
	ts2 := b.slack.AddMessage(qaGeneral, "", qaAlice, b.mention+" share it")
	if r := b.postSigned("/slack/events", jsonCT, b.slack.EventCallbackJSON("Ev0HTTP0003", b.slack.MessageEvent(qaGeneral, qaAlice, b.mention+" share it", ts2, "")), time.Now(), qaSecret, nil); r.StatusCode != 200 {
		t.Fatalf("second event: %d", r.StatusCode)
	}
	card := b.waitPost("card", isCard)
	btn := cardButtons(t, card.Blocks)
	clickBody := func(user, value string) []byte {
		return slackfake.InteractionForm(b.slack.BlockActionsJSON(slackfake.Click{
			Channel: qaGeneral, MessageTS: card.TS, ThreadTS: ts2, User: user, UserName: user, ActionID: "approve", Value: value, Label: "Approve",
		}))
	}
	const formCT = "application/x-www-form-urlencoded"
	if r := b.postSigned("/slack/interactions", formCT, clickBody(qaBob, btn["approve"]), time.Now(), "forged", nil); r.StatusCode != http.StatusUnauthorized {
		t.Fatalf("forged interaction: %d, want 401", r.StatusCode)
	}
	if r := b.postSigned("/slack/interactions", formCT, clickBody(qaBob, "X"+btn["approve"]), time.Now(), qaSecret, nil); r.StatusCode != 200 {
		t.Fatalf("click with a bad token: %d", r.StatusCode)
	}
	b.waitEphemeral("refusal of a bad token", func(e slackfake.Ephemeral) bool {
		return e.User == qaBob && strings.Contains(e.Text, "could not be verified")
	})
	if n := b.count(hasText("could not be verified")); n != 0 {
		t.Fatalf("the bad-token refusal was posted publicly %d times", n)
	}
	if r := b.postSigned("/slack/interactions", formCT, clickBody(qaBob, btn["approve"]), time.Now(), qaSecret, nil); r.StatusCode != 200 {
		t.Fatalf("click: %d", r.StatusCode)
	}
	b.waitPost("approved post", func(p slackfake.Post) bool {
		return p.Channel == qaOther && strings.Contains(p.Text, "httpcard report")
	})
	b.waitPost("final", hasText("httpcard shared"))
	for _, raw := range []string{"payload=%7Bnot+json", "", "nopayload=1", "payload=%7B%7D", `payload=%7B%22type%22%3A%22block_actions%22%7D`} {
		if r := b.postSigned("/slack/interactions", formCT, []byte(raw), time.Now(), qaSecret, nil); r.StatusCode != 200 {
			t.Errorf("signed malformed interaction %q: %d, want 200", raw, r.StatusCode)
		}
	}
	// Health still fine, and the process stops cleanly.
	if r, err := http.Get(b.httpURL + "/healthz"); err != nil || r.StatusCode != 200 {
		t.Fatalf("healthz: %v %v", r, err)
	}
	b.verify()
}
