package slack

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/adapters/slack/slackfake"
	"github.com/marlowe-bot/marlowe/core"
)

// An edit that fails transiently (Slack's internal_error) is sent again: an
// edit is idempotent, and a finished run's checklist must not keep saying
// "Working on it". A definite refusal is not retried.
func TestUpdateRetriesTransientFailures(t *testing.T) {
	f := newFake(t)
	a, _ := newAdapter(t, testConfig(f, ModeSocket))
	ctx := context.Background()
	ref, err := a.Post(ctx, core.Outbound{Key: "k1", Scope: core.Scope{Platform: Platform, Channel: chPublic}, Text: "⏳ Working on it…"})
	if err != nil {
		t.Fatal(err)
	}
	f.FailCalls("chat.update", 2, "internal_error")
	if err := a.Update(ctx, ref, core.Outbound{Text: "✅ Done", Priority: core.PriorityEdit}); err != nil {
		t.Fatalf("update after two transient failures: %v", err)
	}
	if m, _ := f.Message(chPublic, ref.ID); m.Text != "✅ Done" {
		t.Fatalf("message text %q", m.Text)
	}
	before := f.CallCount("chat.update")
	f.FailCalls("chat.update", 5, "cant_update_message")
	if err := a.Update(ctx, ref, core.Outbound{Text: "again", Priority: core.PriorityEdit}); err == nil {
		t.Fatal("a refused edit reported success")
	}
	if n := f.CallCount("chat.update") - before; n != 1 {
		t.Fatalf("a definite refusal was sent %d times", n)
	}
}

// Signed requests whose body cannot be used are acknowledged (200): they
// came from Slack, a retry would fail the same way, and Slack counts
// failures against the app. Nothing is delivered.
func TestHTTPSignedGarbageAcknowledged(t *testing.T) {
	f := newFake(t)
	cfg := testConfig(f, ModeHTTP)
	a, _ := newAdapter(t, cfg)
	rec := newRecorder()
	run(t, a, rec.deliver)
	srv := httptest.NewServer(a.Handler())
	t.Cleanup(srv.Close)
	// Run takes deliveries only after auth.test and the agent-surface
	// check that follows it; before, Slack is asked to retry (503).
	waitUntil(t, 5*time.Second, "Run to take deliveries", a.takesDeliveries)
	cases := []struct{ path, ct, body string }{
		{"/slack/events", "application/json", "not json"},
		{"/slack/events", "application/json", ""},
		{"/slack/events", "application/json", `{"type":"event_callback","event":{"type":"message","subtype":"message_deleted","channel":"` + chPublic + `","channel_type":"channel","ts":"1700000000.000001"}}`},
		{"/slack/interactions", "application/x-www-form-urlencoded", "payload=%7Bnot+json"},
		{"/slack/interactions", "application/x-www-form-urlencoded", ""},
	}
	for _, c := range cases {
		req, err := slackfake.SignedRequest(srv.URL+c.path, cfg.SigningSecret, time.Now(), c.ct, []byte(c.body))
		if err != nil {
			t.Fatal(err)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Errorf("%s %q: %d, want 200", c.path, c.body, res.StatusCode)
		}
	}
	if n := rec.callCount(); n != 0 {
		t.Fatalf("deliver called %d times", n)
	}
}

// A message event with no author at all (message_deleted carries only
// previous_message; a malformed payload may carry nothing) is acknowledged
// and never handed to the engine, which requires a verified author: it
// would refuse it, and Slack would redeliver it forever.
func TestSocketAuthorlessMessageAckedNotDelivered(t *testing.T) {
	f := newFake(t)
	a, _ := newAdapter(t, testConfig(f, ModeSocket))
	rec := connectSocket(t, f, a, func(_ context.Context, _ int, in core.Inbound) error {
		if in.Event != nil && in.Event.Author.ID == "" {
			return errors.New("deliver event: message id and verified author are required")
		}
		return nil
	})
	ts := f.AddMessage(chPublic, "", alice, "soon gone")
	ids := []string{
		f.PushEvent(map[string]any{
			"type": "message", "subtype": "message_deleted", "hidden": true, "channel": chPublic,
			"channel_type": "channel", "ts": "1700000000.000100", "deleted_ts": ts,
			"previous_message": map[string]any{"type": "message", "user": alice, "text": "soon gone", "ts": ts},
		}),
		f.PushEvent(map[string]any{"type": "message", "channel": chPublic, "channel_type": "channel", "ts": "1700000000.000101", "text": botMention(f) + " who am I"}),
	}
	for _, id := range ids {
		if !f.WaitEventAcked(id, 3*time.Second) {
			t.Fatalf("%s not acknowledged (%d attempts)", id, f.Attempts(id))
		}
		if n := f.Attempts(id); n != 1 {
			t.Fatalf("%s sent %d times", id, n)
		}
	}
	if n := rec.callCount(); n != 0 {
		t.Fatalf("deliver called %d times for author-less events", n)
	}
}

// Socket Mode: Slack's retry of a click (retry_attempt > 0) is deduplicated,
// but the very same click payload pushed again as a fresh envelope is a
// replay: it reaches the engine, which refuses it visibly.
func TestSocketClickRetryDedupedReplayDelivered(t *testing.T) {
	f := newFake(t)
	a, _ := newAdapter(t, testConfig(f, ModeSocket))
	rec := connectSocket(t, f, a, nil)
	cardTS := f.AddMessage(chPublic, "", f.Config().BotUserID, "card")
	payload := f.BlockActionsJSON(slackfake.Click{
		Channel: chPublic, MessageTS: cardTS, User: bob, UserName: "bob",
		BlockID: "card-1", ActionID: "approve", Value: "tok.1", Label: "Approve",
	})
	id := f.PushInteraction(payload)
	if !f.WaitEventAcked(id, 3*time.Second) {
		t.Fatal("click not acknowledged")
	}
	f.Redeliver(id) // retry_attempt 1
	waitUntil(t, 3*time.Second, "retry acknowledged", func() bool {
		envs := f.Envelopes(id)
		return len(envs) == 2 && f.Acked(envs[1])
	})
	if n := len(rec.clicks()); n != 1 {
		t.Fatalf("a retried click was delivered again: %d clicks", n)
	}
	id2 := f.PushInteraction(payload) // the same bytes, a new delivery
	if !f.WaitEventAcked(id2, 3*time.Second) {
		t.Fatal("replay not acknowledged")
	}
	if n := len(rec.clicks()); n != 2 {
		t.Fatalf("a replayed click did not reach the engine: %d clicks", n)
	}
}

// Permalink asks Slack for a message's link (status and approvals link
// threads with it); an unknown message is an error, not a guessed link.
func TestPermalink(t *testing.T) {
	f := newFake(t)
	a, _ := newAdapter(t, testConfig(f, ModeSocket))
	ctx := context.Background()
	ref, err := a.Post(ctx, core.Outbound{Key: "p1", Scope: core.Scope{Platform: Platform, Channel: chPublic}, Text: "hello"})
	if err != nil {
		t.Fatal(err)
	}
	link, err := a.Permalink(ctx, ref)
	if err != nil || link != "https://fake.slack.com/archives/"+chPublic+"/p"+strings.ReplaceAll(ref.ID, ".", "") {
		t.Fatalf("permalink = %q, %v", link, err)
	}
	if _, err := a.Permalink(ctx, core.MessageRef{Scope: ref.Scope, ID: "1.000009"}); err == nil {
		t.Errorf("a link for a message that does not exist")
	}
}
