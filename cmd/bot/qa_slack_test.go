package main

// Adversarial QA of the Slack surface, as a Slack user sees it: the real
// `bot serve` composition root against the local fake Slack and the fake
// OpenAI-compatible model. Each test has its own fakes and data dir and
// runs in parallel with the others.

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/adapters/slack/slackfake"
)

// saidTo matches the fake model's default echo answer of a message that
// carried word.
func saidTo(word string) func(slackfake.Post) bool {
	return func(p slackfake.Post) bool {
		return strings.Contains(p.Text, "You said:") && strings.Contains(p.Text, word)
	}
}

// TestQASlack is the adversarial QA suite of the Slack surface: the real
// `bot serve` against a fake Slack and a fake OpenAI-compatible model,
// every scenario with its own fakes and data dir, all running at once.
func TestQASlack(t *testing.T) {
	t.Parallel()
	runConcurrently(t, map[string]func(*testing.T){
		"edited-in-mention":        qaEditedInMentionIgnored,
		"app-mention-alone":        qaAppMentionAlone,
		"message-no-channel-type":  qaMessageWithoutChannelType,
		"redelivery-after-ack":     qaRedeliveryAfterSlowAck,
		"thread-mention-windows":   qaThreadMentionAndWindows,
		"top-level-window":         qaTopLevelWindow,
		"private-and-mpim":         qaPrivateChannelAndMPIM,
		"direct-message":           qaDirectMessage,
		"subtypes":                 qaSubtypes,
		"malformed-events":         qaMalformedEvents,
		"restart":                  qaRestartKeepsWindowsAndDedupe,
		"approval-clicks":          qaApprovalClicks,
		"model-failures":           qaModelFailures,
		"long-answer-split":        qaLongAnswerSplit,
		"slack-429-and-edit-fails": qaSlackRateLimitAndEditFailures,
		"http-mode":                qaHTTPMode,
		"conversation-flow":        qaConversationFlow,
		"superseded-card":          qaSupersededCard,
		"checklist-edit-transient": qaChecklistEditTransientFailure,
	})
}

// qaEditedInMentionIgnored: editing a message to add the bot's mention
// does not summon it (message_changed, and app_mention carrying "edited").
func qaEditedInMentionIgnored(t *testing.T) {
	b := startQA(t, qaOpts{})
	ts := b.slack.AddMessage(qaGeneral, "", qaAlice, "original text")
	editTS := b.slack.AddMessage(qaGeneral, "", qaAlice, "") // the edit event's own ts
	ev := map[string]any{
		"type": "message", "subtype": "message_changed", "hidden": true, "channel": qaGeneral,
		"channel_type": "channel", "ts": editTS, "event_ts": editTS,
		"message": map[string]any{
			"type": "message", "user": qaAlice, "text": b.mention + " editedkiwi please", "ts": ts,
			"edited": map[string]any{"user": qaAlice, "ts": editTS},
		},
		"previous_message": map[string]any{"type": "message", "user": qaAlice, "text": "original text", "ts": ts},
	}
	id1 := b.slack.PushEvent(ev)
	// Slack also fires app_mention for an edit that adds a mention, with
	// "edited" set and the original ts.
	id2 := b.slack.PushEvent(map[string]any{
		"type": "app_mention", "channel": qaGeneral, "user": qaAlice, "text": b.mention + " editedkiwi please",
		"ts": ts, "event_ts": editTS, "edited": map[string]any{"user": qaAlice, "ts": editTS},
	})
	b.waitAcked(id1, id2)
	b.quiet("edited-in mention", time.Second, inChannel(qaGeneral))
	if st := b.journal(qaGeneral); st.Counts["message.received"] != 0 {
		t.Fatalf("an edit was journaled: %+v", st.Counts)
	}
}

// qaAppMentionAlone: an app_mention delivered without its message event
// (the app subscribes to app_mention only, or message.channels lost it).
func qaAppMentionAlone(t *testing.T) {
	b := startQA(t, qaOpts{})
	ts := b.slack.AddMessage(qaGeneral, "", qaAlice, b.mention+" lonelykiwi")
	id := b.slack.PushEvent(b.slack.AppMentionEvent(qaGeneral, qaAlice, b.mention+" lonelykiwi", ts, ""))
	b.waitAcked(id)
	p := b.waitPost("answer to a lone app_mention", saidTo("lonelykiwi"))
	if p.Channel != qaGeneral || p.ThreadTS != ts {
		t.Fatalf("answered in %s/%q, want thread %s", p.Channel, p.ThreadTS, ts)
	}
}

// qaMessageWithoutChannelType: a message event that lacks channel_type
// (seen on some deliveries) is still answered when it mentions the bot, and
// visibility comes from conversations.info.
func qaMessageWithoutChannelType(t *testing.T) {
	b := startQA(t, qaOpts{})
	ts := b.slack.AddMessage(qaGeneral, "", qaAlice, b.mention+" notypekiwi")
	id := b.slack.PushEvent(b.msgEvent(qaGeneral, qaAlice, b.mention+" notypekiwi", ts, "", map[string]any{"channel_type": nil}))
	b.waitAcked(id)
	p := b.waitPost("answer", saidTo("notypekiwi"))
	if p.ThreadTS != ts {
		t.Fatalf("answered in thread %q, want %s", p.ThreadTS, ts)
	}
	// A person answers once the run is over (its post opened the window).
	b.waitIdle()
	// An untagged follow-up in that public thread (no channel_type either)
	// is in the thread window.
	ts2 := b.slack.AddMessage(qaGeneral, ts, qaBob, "notypefollow")
	b.slack.PushEvent(b.msgEvent(qaGeneral, qaBob, "notypefollow", ts2, ts, map[string]any{"channel_type": nil}))
	b.waitPost("follow-up answer", saidTo("notypefollow"))

	// A DM without channel_type: answered at the top level of the DM.
	dts := b.slack.AddMessage(qaDM, "", qaAlice, "notypedmkiwi")
	b.slack.PushEvent(b.msgEvent(qaDM, qaAlice, "notypedmkiwi", dts, "", map[string]any{"channel_type": nil}))
	p = b.waitPost("DM answer", saidTo("notypedmkiwi"))
	if p.Channel != qaDM || p.ThreadTS != "" {
		t.Fatalf("DM answered in %s/%q", p.Channel, p.ThreadTS)
	}
	// A private channel with a C id, no channel_type: the mention is
	// answered, the untagged follow-up is not.
	pts := b.slack.AddMessage(qaPrivate, "", qaAlice, b.mention+" notypeprivkiwi")
	b.slack.PushEvent(b.msgEvent(qaPrivate, qaAlice, b.mention+" notypeprivkiwi", pts, "", map[string]any{"channel_type": nil}))
	b.waitPost("private answer", saidTo("notypeprivkiwi"))
	pts2 := b.slack.AddMessage(qaPrivate, pts, qaBob, "notypeprivfollow")
	b.slack.PushEvent(b.msgEvent(qaPrivate, qaBob, "notypeprivfollow", pts2, pts, map[string]any{"channel_type": nil}))
	b.quiet("untagged in a private channel", time.Second, saidTo("notypeprivfollow"))
}

// qaRedeliveryAfterSlowAck: Slack resends an event (retry_attempt 1,
// 2) when its ack came late; the bot answers once.
func qaRedeliveryAfterSlowAck(t *testing.T) {
	b := startQA(t, qaOpts{})
	ts, ids := b.slack.Say(qaGeneral, "", qaAlice, b.mention+" retrykiwi")
	b.waitAcked(ids...)
	for _, id := range ids {
		b.slack.Redeliver(id)
		b.slack.Redeliver(id)
	}
	b.waitPost("answer", saidTo("retrykiwi"))
	time.Sleep(800 * time.Millisecond)
	if n := b.count(saidTo("retrykiwi")); n != 1 {
		t.Fatalf("answered %d times", n)
	}
	if n := b.count(inThread(qaGeneral, ts)); n != 1 { // a one-step answer: no checklist
		t.Fatalf("%d posts in the thread, want 1 (the answer):\n%s", n, b.dumpPosts())
	}
	for _, id := range ids {
		for _, env := range b.slack.Envelopes(id) {
			if !b.slack.Acked(env) {
				t.Errorf("envelope %s of %s not acknowledged", env, id)
			}
		}
	}
	if st := b.journal(qaGeneral); st.Counts["message.received"] != 1 {
		t.Fatalf("journaled %d messages, want 1", st.Counts["message.received"])
	}
}

// qaThreadMentionAndWindows walks the thread rules in a public channel:
// a mention inside someone else's thread is answered in that thread (root
// ts); a third person's untagged follow-up is answered; a mention of
// another person or <!here> in the thread is not; once the window (set to
// 2 s by an admin) lapses, untagged follow-ups are ignored.
func qaThreadMentionAndWindows(t *testing.T) {
	b := startQA(t, qaOpts{})
	// Shorten the thread window in this channel (grammar, no model).
	_, _ = b.slack.Say(qaGeneral, "", qaAlice, b.mention+" policy set window thread 3s")
	b.waitPost("policy answer", hasText("Policy updated"))

	root, _ := b.slack.Say(qaGeneral, "", qaCarol, "anyone know why the build is red?")
	reply, _ := b.slack.Say(qaGeneral, root, qaBob, b.mention+" threadkiwi can you look?")
	p := b.waitPost("answer in thread", saidTo("threadkiwi"))
	if p.ThreadTS != root {
		t.Fatalf("answered with thread_ts %q; want the root %s (not the reply %s)", p.ThreadTS, root, reply)
	}
	// A person answers once the run is over (its post opened the window).
	b.waitIdle()
	// A third person, untagged, inside the window.
	b.slack.Say(qaGeneral, root, qaAlice, "thirdkiwi what about flaky tests?")
	p = b.waitPost("untagged follow-up", saidTo("thirdkiwi"))
	if p.ThreadTS != root {
		t.Fatalf("follow-up answered in %q, want %s", p.ThreadTS, root)
	}
	// Addressed to others inside the window: silent.
	b.slack.Say(qaGeneral, root, qaAlice, "<@"+qaCarol+"> otherkiwi did you rerun it?")
	b.slack.Say(qaGeneral, root, qaAlice, "<!here> herekiwi heads up")
	b.slack.Say(qaGeneral, root, qaAlice, "<!subteam^S0QAGROUP1|oncall> groupkiwi ping")
	b.quiet("addressed to others", 1200*time.Millisecond, func(p slackfake.Post) bool {
		return strings.Contains(p.Text, "otherkiwi") || strings.Contains(p.Text, "herekiwi") || strings.Contains(p.Text, "groupkiwi")
	})
	// Let the 3 s window lapse after the bot's latest post.
	time.Sleep(3500 * time.Millisecond)
	b.slack.Say(qaGeneral, root, qaCarol, "latekiwi still there?")
	b.quiet("after the thread window", time.Second, saidTo("latekiwi"))
}

// qaTopLevelWindow: after answering Alice's top-level message, Alice's
// next top-level message is answered (in a thread under it); Bob's is not.
func qaTopLevelWindow(t *testing.T) {
	b := startQA(t, qaOpts{})
	first, _ := b.slack.Say(qaGeneral, "", qaAlice, b.mention+" topkiwi one")
	b.waitPost("first answer", saidTo("topkiwi"))
	// A person answers once the run is over (its post opened the window).
	b.waitIdle()
	b.slack.Say(qaGeneral, "", qaBob, "bobkiwi unrelated chatter")
	next, _ := b.slack.Say(qaGeneral, "", qaAlice, "alicekiwi and another thing")
	p := b.waitPost("top-level follow-up", saidTo("alicekiwi"))
	if p.ThreadTS != next || p.ThreadTS == first {
		t.Fatalf("follow-up answered in thread %q, want a new thread under %s", p.ThreadTS, next)
	}
	b.quiet("another person's top-level message", 800*time.Millisecond, saidTo("bobkiwi"))
	for _, p := range b.slack.Posts() {
		if p.ThreadTS == "" {
			t.Fatalf("the bot posted at the top level of a channel: %q", p.Text)
		}
	}
}

// qaPrivateChannelAndMPIM: in a private channel and a group DM a mention
// is answered; untagged follow-ups in the thread are not.
func qaPrivateChannelAndMPIM(t *testing.T) {
	b := startQA(t, qaOpts{})
	for _, ch := range []string{qaPrivate, qaMPIM} {
		root, _ := b.slack.Say(ch, "", qaAlice, b.mention+" privkiwi"+ch)
		p := b.waitPost("answer in "+ch, saidTo("privkiwi"+ch))
		if p.Channel != ch || p.ThreadTS != root {
			t.Fatalf("answered in %s/%q, want %s/%s", p.Channel, p.ThreadTS, ch, root)
		}
		b.slack.Say(ch, root, qaBob, "untaggedkiwi"+ch)
		b.slack.Say(ch, "", qaAlice, "toplevelkiwi"+ch)
	}
	b.quiet("untagged in private", 1200*time.Millisecond, func(p slackfake.Post) bool {
		return strings.Contains(p.Text, "untaggedkiwi") || strings.Contains(p.Text, "toplevelkiwi")
	})
}

// qaDirectMessage: a DM is answered at the top level of the DM (no
// app_mention fires in DMs), and so is a follow-up.
func qaDirectMessage(t *testing.T) {
	b := startQA(t, qaOpts{})
	b.slack.Say(qaDM, "", qaAlice, "dmkiwi hello there")
	p := b.waitPost("DM answer", saidTo("dmkiwi"))
	if p.Channel != qaDM || p.ThreadTS != "" {
		t.Fatalf("DM answered in %s/%q, want the top level of %s", p.Channel, p.ThreadTS, qaDM)
	}
	b.slack.Say(qaDM, "", qaAlice, "dmfollowkiwi again")
	p = b.waitPost("DM follow-up", saidTo("dmfollowkiwi"))
	if p.ThreadTS != "" {
		t.Fatalf("DM follow-up answered in thread %q", p.ThreadTS)
	}
	// A DM message in a thread is answered in that thread.
	root := p.TS
	b.slack.Say(qaDM, root, qaAlice, "dmthreadkiwi in thread")
	p = b.waitPost("DM thread answer", saidTo("dmthreadkiwi"))
	if p.ThreadTS != root {
		t.Fatalf("DM thread reply answered in %q, want %s", p.ThreadTS, root)
	}
	for _, p := range b.slack.Posts() {
		if p.Channel != qaDM {
			t.Fatalf("posted outside the DM: %+v", p)
		}
	}
}

// qaSubtypes: file_share and thread_broadcast are a person's posts;
// bot_message from another bot, the bot's own echo and a display-name-only
// "mention" are not answered.
func qaSubtypes(t *testing.T) {
	b := startQA(t, qaOpts{})
	// file_share with a mention.
	fts := b.slack.AddMessage(qaGeneral, "", qaAlice, b.mention+" filekiwi see attached")
	b.slack.PushEvent(b.msgEvent(qaGeneral, qaAlice, b.mention+" filekiwi see attached", fts, "", map[string]any{
		"subtype": "file_share", "files": []map[string]any{{"id": "F0QAFILE01", "name": "report.csv", "mimetype": "text/csv"}},
		"upload": false, "display_as_bot": false,
	}))
	p := b.waitPost("file_share answer", saidTo("filekiwi"))
	if p.ThreadTS != fts {
		t.Fatalf("file_share answered in %q, want %s", p.ThreadTS, fts)
	}
	// thread_broadcast with a mention, in a thread started by Carol.
	root := b.slack.AddMessage(qaOther, "", qaCarol, "deploy thread")
	bts := b.slack.AddMessage(qaOther, root, qaBob, b.mention+" broadkiwi")
	b.slack.PushEvent(b.msgEvent(qaOther, qaBob, b.mention+" broadkiwi", bts, root, map[string]any{
		"subtype": "thread_broadcast", "root": map[string]any{"ts": root, "user": qaCarol, "text": "deploy thread"},
	}))
	p = b.waitPost("thread_broadcast answer", saidTo("broadkiwi"))
	if p.ThreadTS != root {
		t.Fatalf("thread_broadcast answered in %q, want the root %s", p.ThreadTS, root)
	}
	// Another bot mentioning us.
	ots := b.slack.AddMessage(qaGeneral, "", "", b.mention+" botkiwi")
	b.slack.PushEvent(map[string]any{
		"type": "message", "subtype": "bot_message", "channel": qaGeneral, "channel_type": "channel",
		"bot_id": "B0OTHERBOT", "username": "otherbot", "text": b.mention + " botkiwi", "ts": ots, "event_ts": ots,
	})
	ots2 := b.slack.AddMessage(qaGeneral, "", "U0OTHERBOT", b.mention+" botuserkiwi")
	b.slack.PushEvent(b.msgEvent(qaGeneral, "U0OTHERBOT", b.mention+" botuserkiwi", ots2, "", map[string]any{
		"bot_id": "B0OTHERBOT", "bot_profile": map[string]any{"id": "B0OTHERBOT", "name": "otherbot"},
	}))
	b.slack.PushEvent(b.slack.AppMentionEvent(qaGeneral, "U0OTHERBOT", b.mention+" botuserkiwi", ots2, ""))
	// A display-name "mention" without the id token.
	b.slack.Say(qaGeneral, "", qaCarol, "marlowe-fake can you namekiwi")
	b.slack.Say(qaGeneral, "", qaCarol, "@marlowe-fake namekiwi2 please")
	b.quiet("not addressed by id / from bots", 1200*time.Millisecond, func(p slackfake.Post) bool {
		return strings.Contains(p.Text, "botkiwi") || strings.Contains(p.Text, "botuserkiwi") || strings.Contains(p.Text, "namekiwi")
	})
	// The bot's own echoes (EchoPosts) never triggered a run: exactly the
	// two answers (one-step answers post no checklist).
	if n := len(b.slack.Posts()); n != 2 {
		t.Fatalf("%d posts, want 2:\n%s", n, b.dumpPosts())
	}
}

// qaMalformedEvents: payloads with missing fields, unknown types and
// deletions are acknowledged (no redelivery storm), ignored, and the bot
// keeps working.
func qaMalformedEvents(t *testing.T) {
	b := startQA(t, qaOpts{})
	ts := b.slack.AddMessage(qaGeneral, "", qaAlice, "to be deleted")
	var ids []string
	// No user, no bot_id (a deletion, as Slack sends it).
	ids = append(ids, b.slack.PushEvent(map[string]any{
		"type": "message", "subtype": "message_deleted", "hidden": true, "channel": qaGeneral, "channel_type": "channel",
		"ts": "1700000000.000900", "deleted_ts": ts, "event_ts": "1700000000.000900",
		"previous_message": map[string]any{"type": "message", "user": qaAlice, "text": "to be deleted", "ts": ts},
	}))
	// A plain message event with the user missing.
	ids = append(ids, b.slack.PushEvent(map[string]any{"type": "message", "channel": qaGeneral, "channel_type": "channel", "text": b.mention + " nouserkiwi", "ts": "1700000000.000901"}))
	// Missing channel, missing ts, missing everything.
	ids = append(ids, b.slack.PushEvent(map[string]any{"type": "message", "user": qaAlice, "text": b.mention + " nochankiwi", "ts": "1700000000.000902"}))
	ids = append(ids, b.slack.PushEvent(map[string]any{"type": "message", "channel": qaGeneral, "user": qaAlice, "text": b.mention + " notskiwi"}))
	ids = append(ids, b.slack.PushEvent(map[string]any{"type": "app_mention"}))
	ids = append(ids, b.slack.PushEvent(map[string]any{}))
	ids = append(ids, b.slack.PushEvent(map[string]any{"type": "reaction_added", "user": qaAlice, "reaction": "eyes", "item": map[string]any{"type": "message", "channel": qaGeneral, "ts": ts}}))
	ids = append(ids, b.slack.PushEvent(map[string]any{"type": "message", "channel": qaGeneral, "user": qaAlice, "text": 42, "ts": "x"}))
	// Envelopes that are not even an event callback.
	ids = append(ids, b.slack.PushEnvelope("events_api", []byte(`{"type":"event_callback"}`)))
	ids = append(ids, b.slack.PushEnvelope("events_api", []byte(`"just a string"`)))
	ids = append(ids, b.slack.PushEnvelope("events_api", []byte(`{"type":"event_callback","event":{"type":"message","channel":[1,2]}}`)))
	ids = append(ids, b.slack.PushEnvelope("interactive", []byte(`{"type":"block_actions"}`)))
	ids = append(ids, b.slack.PushEnvelope("interactive", []byte(`{"type":"block_actions","user":{"id":"`+qaAlice+`"},"channel":{"id":"`+qaGeneral+`"},"actions":[{"action_id":"approve","value":"garbage"}]}`)))
	ids = append(ids, b.slack.PushEnvelope("mystery_type", []byte(`{}`)))
	b.waitAcked(ids...)
	for _, id := range ids {
		if n := b.slack.Attempts(id); n != 1 {
			t.Errorf("delivery %s was sent %d times (not acknowledged in time)", id, n)
		}
	}
	b.quiet("malformed events", 500*time.Millisecond, func(p slackfake.Post) bool { return strings.Contains(p.Text, "kiwi") })
	// Still alive and answering.
	b.slack.Say(qaGeneral, "", qaAlice, b.mention+" alivekiwi")
	b.waitPost("answer after malformed events", saidTo("alivekiwi"))
}

// qaRestartKeepsWindowsAndDedupe: after a restart (same data dir, same
// Slack), the thread window still holds, Slack's late retry of an answered
// mention is not answered again, and a thread mention inside someone
// else's thread does not open a top-level window for its author.
func qaRestartKeepsWindowsAndDedupe(t *testing.T) {
	b := startQA(t, qaOpts{})
	root, ids := b.slack.Say(qaGeneral, "", qaAlice, b.mention+" restartkiwi")
	b.waitPost("answer", saidTo("restartkiwi"))
	// A mention inside Carol's thread by Bob: answered there...
	croot, _ := b.slack.Say(qaGeneral, "", qaCarol, "carol's topic")
	b.slack.Say(qaGeneral, croot, qaBob, b.mention+" bobthreadkiwi")
	b.waitPost("thread answer", saidTo("bobthreadkiwi"))
	b.stop()

	// Same data dir, a new process against the same fake Slack.
	vars := map[string]string{
		"MARLOWE_DATA_DIR": b.dir, "MARLOWE_HTTP_ADDR": "127.0.0.1:0",
		"SLACK_BOT_TOKEN": "xoxb-qa-token", "SLACK_APP_TOKEN": "xapp-qa-token",
		"MARLOWE_SLACK_API_URL": b.slack.APIURL(), "MARLOWE_MODEL_PROVIDER": "openai",
		"MARLOWE_MODEL": "fake-model", "MARLOWE_MODEL_BASE_URL": b.model.URL,
	}
	b2 := &qaBot{t: t, slack: b.slack, model: b.model, dir: b.dir, logs: &syncBuffer{}, done: make(chan error, 1), mention: b.mention}
	ctx, cancel := context.WithCancel(t.Context())
	b2.cancel = cancel
	go func() { b2.done <- run(ctx, []string{"serve"}, env(vars), strings.NewReader(""), io.Discard, b2.logs) }()
	t.Cleanup(b2.stop)
	conns := b.slack.ConnectionsOpened()
	for deadline := time.Now().Add(10 * time.Second); b.slack.ConnectionsOpened() == conns || b.slack.Connections() == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no reconnect:\n%s", b2.logs.String())
		}
	}
	for _, id := range ids {
		b.slack.Redeliver(id)
	}
	b.slack.Say(qaGeneral, root, qaBob, "postrebootkiwi")
	b2.waitPost("follow-up after restart", saidTo("postrebootkiwi"))
	// Bob was answered inside a thread, not at the top level: his next
	// top-level message is not for the bot.
	b.slack.Say(qaGeneral, "", qaBob, "bobtopkiwi")
	b2.quiet("top level after a thread answer", time.Second, saidTo("bobtopkiwi"))
	if n := b2.count(saidTo("restartkiwi")); n != 1 {
		t.Fatalf("answered %d times after the retry:\n%s\n%s", n, b2.dumpPosts(), b2.logs.String())
	}
}
