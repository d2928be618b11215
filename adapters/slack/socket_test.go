package slack

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/adapters/slack/slackfake"
	"github.com/marlowe-bot/marlowe/core"
)

// A mention arrives over Socket Mode, is normalised, and is acknowledged only
// after deliver returned nil.
func TestSocketMentionNormalisedAndAckedAfterDeliver(t *testing.T) {
	f := newFake(t)
	a, logs := newAdapter(t, testConfig(f, ModeSocket))
	release := make(chan struct{})
	var returnedAt time.Time
	var mu sync.Mutex
	rec := connectSocket(t, f, a, func(ctx context.Context, n int, in core.Inbound) error {
		if n == 1 {
			<-release
			mu.Lock()
			returnedAt = time.Now()
			mu.Unlock()
		}
		return nil
	})

	secret := "remember the milk is in the blue fridge"
	ts, evIDs := f.Say(chPublic, "", alice, botMention(f)+" "+secret)
	if len(evIDs) != 2 {
		t.Fatalf("fake sent %d events, want app_mention + message", len(evIDs))
	}
	waitUntil(t, 3*time.Second, "deliver to be called", func() bool { return rec.callCount() >= 1 })
	time.Sleep(150 * time.Millisecond)
	for _, id := range evIDs {
		if f.EventAcked(id) {
			t.Fatalf("event %s acknowledged while deliver had not returned", id)
		}
	}
	close(release)
	for _, id := range evIDs {
		if !f.WaitEventAcked(id, 3*time.Second) {
			t.Fatalf("event %s never acknowledged", id)
		}
	}
	mu.Lock()
	ret := returnedAt
	mu.Unlock()
	for _, ack := range f.Acks() {
		if ack.EventID == evIDs[0] && ack.At.Before(ret) {
			t.Fatalf("ack at %v came before deliver returned at %v", ack.At, ret)
		}
	}

	evs := rec.events()
	if len(evs) != 1 {
		t.Fatalf("delivered %d events, want 1 (app_mention + message are one message)", len(evs))
	}
	ev := evs[0]
	want := core.Scope{Platform: "slack", Workspace: f.Config().TeamID, Channel: chPublic, Thread: ""}
	if ev.Scope != want {
		t.Errorf("scope = %+v, want %+v", ev.Scope, want)
	}
	if ev.MessageID != ts || ev.Visibility != core.Public || ev.Subtype != "" {
		t.Errorf("id/visibility/subtype = %q/%q/%q", ev.MessageID, ev.Visibility, ev.Subtype)
	}
	if ev.Author.ID != alice || ev.Author.IsBot {
		t.Errorf("author = %+v", ev.Author)
	}
	if !ev.MentionsBot || len(ev.Mentions) != 1 || ev.Mentions[0] != (core.Mention{Kind: core.MentionUser, ID: f.Config().BotUserID}) {
		t.Errorf("mentions = %+v, mentionsBot = %v", ev.Mentions, ev.MentionsBot)
	}
	if ev.Text != secret {
		t.Errorf("text = %q, want the bot's leading mention stripped", ev.Text)
	}
	if ev.ReplyToBot || ev.At.IsZero() {
		t.Errorf("replyToBot = %v, at = %v", ev.ReplyToBot, ev.At)
	}
	if strings.Contains(logs.String(), "milk") {
		t.Errorf("message text leaked into logs:\n%s", logs.String())
	}
}

// The same message delivered as app_mention and as message (two event ids,
// one ts), in either order, reaches the engine once; both are acknowledged.
func TestSocketDoubleDeliveryDeliveredOnce(t *testing.T) {
	f := newFake(t)
	a, _ := newAdapter(t, testConfig(f, ModeSocket))
	rec := connectSocket(t, f, a, nil)

	text := botMention(f) + " hello"
	ts1 := f.AddMessage(chPublic, "", alice, text)
	ids := []string{
		f.PushEvent(f.AppMentionEvent(chPublic, alice, text, ts1, "")),
		f.PushEvent(f.MessageEvent(chPublic, alice, text, ts1, "")),
	}
	ts2 := f.AddMessage(chPublic, "", bob, text)
	ids = append(ids,
		f.PushEvent(f.MessageEvent(chPublic, bob, text, ts2, "")),
		f.PushEvent(f.AppMentionEvent(chPublic, bob, text, ts2, "")),
	)
	for _, id := range ids {
		if !f.WaitEventAcked(id, 3*time.Second) {
			t.Fatalf("event %s not acknowledged", id)
		}
	}
	time.Sleep(100 * time.Millisecond)
	evs := rec.events()
	if len(evs) != 2 || evs[0].MessageID != ts1 || evs[1].MessageID != ts2 {
		t.Fatalf("delivered %+v, want ts %s then %s once each", evs, ts1, ts2)
	}
	// Either first arrival carries the same facts.
	if evs[1].Visibility != core.Public || !evs[1].MentionsBot || evs[1].Text != "hello" {
		t.Errorf("message-first normalisation differs: %+v", evs[1])
	}
}

// A slow (but in-time) deliver makes Slack redeliver with retry_attempt; the
// retry is acknowledged and not delivered again.
func TestSocketRetryAfterSlowAckDeliveredOnce(t *testing.T) {
	f := newFake(t, func(c *slackfake.Config) { c.RedeliverAfter = 150 * time.Millisecond })
	a, _ := newAdapter(t, testConfig(f, ModeSocket))
	rec := connectSocket(t, f, a, func(ctx context.Context, n int, in core.Inbound) error {
		if n == 1 {
			time.Sleep(700 * time.Millisecond) // > RedeliverAfter, < AckTimeout
		}
		return nil
	})

	ts := f.AddMessage(chPublic, "", alice, "plain chatter")
	id := f.PushEvent(f.MessageEvent(chPublic, alice, "plain chatter", ts, ""))
	waitUntil(t, 3*time.Second, "a redelivery", func() bool { return f.Attempts(id) >= 2 })
	waitUntil(t, 3*time.Second, "every envelope acked", func() bool {
		envs := f.Envelopes(id)
		for _, e := range envs {
			if !f.Acked(e) {
				return false
			}
		}
		return len(envs) >= 2
	})
	if n := len(rec.events()); n != 1 {
		t.Fatalf("delivered %d times, want 1", n)
	}
	if rec.callCount() != 1 {
		t.Fatalf("deliver called %d times, want 1", rec.callCount())
	}
}

// deliver fails → no ack → Slack redelivers → the redelivery is delivered
// and acknowledged.
func TestSocketDeliverErrorNotAckedThenRedelivered(t *testing.T) {
	f := newFake(t, func(c *slackfake.Config) { c.RedeliverAfter = 200 * time.Millisecond })
	a, _ := newAdapter(t, testConfig(f, ModeSocket))
	rec := connectSocket(t, f, a, func(ctx context.Context, n int, in core.Inbound) error {
		if n == 1 {
			return errors.New("journal unavailable")
		}
		return nil
	})

	ts := f.AddMessage(chPublic, "", alice, "hi")
	id := f.PushEvent(f.MessageEvent(chPublic, alice, "hi", ts, ""))
	if !f.WaitEventAcked(id, 5*time.Second) {
		t.Fatal("redelivery never acknowledged")
	}
	envs := f.Envelopes(id)
	if len(envs) < 2 || f.Acked(envs[0]) {
		t.Fatalf("envelopes %v: want the first unacknowledged and a redelivery", envs)
	}
	if n := len(rec.events()); n != 1 || rec.callCount() != 2 {
		t.Fatalf("delivered %d (calls %d), want 1 success after 1 failure", n, rec.callCount())
	}
}

// deliver that outlives the ack timeout leaves the envelope unacknowledged;
// its late success is still recorded, so the redelivery is not delivered
// again.
func TestSocketAckTimeoutLateSuccessDedupesRedelivery(t *testing.T) {
	f := newFake(t, func(c *slackfake.Config) { c.RedeliverAfter = 600 * time.Millisecond })
	cfg := testConfig(f, ModeSocket)
	cfg.AckTimeout = 200 * time.Millisecond
	a, _ := newAdapter(t, cfg)
	rec := connectSocket(t, f, a, func(ctx context.Context, n int, in core.Inbound) error {
		if n == 1 {
			time.Sleep(400 * time.Millisecond) // ignores ctx, like a stuck engine
		}
		return nil
	})

	ts := f.AddMessage(chPublic, "", alice, "hi")
	id := f.PushEvent(f.MessageEvent(chPublic, alice, "hi", ts, ""))
	if !f.WaitEventAcked(id, 5*time.Second) {
		t.Fatal("never acknowledged")
	}
	envs := f.Envelopes(id)
	if len(envs) < 2 || f.Acked(envs[0]) {
		t.Fatalf("first envelope acked despite the timeout (%v)", envs)
	}
	if rec.callCount() != 1 {
		t.Fatalf("deliver called %d times, want 1", rec.callCount())
	}
}

// Subtypes are kept (the filter ignores them) except real posts; bots and
// our own messages are flagged.
func TestSocketSubtypesAndBots(t *testing.T) {
	f := newFake(t)
	a, _ := newAdapter(t, testConfig(f, ModeSocket))
	rec := connectSocket(t, f, a, nil)
	bot := f.Config().BotUserID

	type tc struct {
		ev          map[string]any
		wantSubtype string
		wantBot     bool
	}
	mk := func(sub, user string, extra map[string]any) map[string]any {
		ts := f.AddMessage(chPublic, "", user, "x")
		ev := f.MessageEvent(chPublic, user, "x", ts, "")
		if sub != "" {
			ev["subtype"] = sub
		}
		for k, v := range extra {
			ev[k] = v
		}
		return ev
	}
	cases := []tc{
		{mk("message_changed", "", map[string]any{"message": map[string]any{"type": "message", "user": alice, "text": "edited", "ts": "1.0"}}), "message_changed", false},
		{mk("channel_join", alice, nil), "channel_join", false},
		{mk("channel_leave", alice, nil), "channel_leave", false},
		{mk("file_share", alice, nil), "", false},
		{mk("thread_broadcast", alice, nil), "", false},
		{mk("bot_message", "", map[string]any{"bot_id": "B0OTHER001"}), "bot_message", true},
		{mk("", "U0OTHERB01", map[string]any{"bot_id": "B0OTHER001"}), "", true},
		{mk("", bot, map[string]any{"bot_id": f.Config().BotID}), "", true},
	}
	var ids []string
	for _, c := range cases {
		ids = append(ids, f.PushEvent(c.ev))
	}
	// A deletion has no author (only previous_message): acknowledged, not
	// delivered (the engine takes only events with a verified author).
	ids = append(ids, f.PushEvent(mk("message_deleted", "", nil)))
	for _, id := range ids {
		if !f.WaitEventAcked(id, 3*time.Second) {
			t.Fatalf("event %s not acknowledged", id)
		}
	}
	evs := rec.events()
	if len(evs) != len(cases) {
		t.Fatalf("delivered %d, want %d", len(evs), len(cases))
	}
	for i, c := range cases {
		if evs[i].Subtype != c.wantSubtype || evs[i].Author.IsBot != c.wantBot {
			t.Errorf("case %d (%v): subtype %q bot %v; want %q %v", i, c.ev["subtype"], evs[i].Subtype, evs[i].Author.IsBot, c.wantSubtype, c.wantBot)
		}
	}
	if evs[0].Author.ID != alice {
		t.Errorf("message_changed author = %q, want the nested message's user", evs[0].Author.ID)
	}
}

// Visibility and threads for every channel kind, including app_mention
// (which carries no channel_type) in a channel seen for the first time.
func TestSocketVisibilityAndThreads(t *testing.T) {
	f := newFake(t)
	a, _ := newAdapter(t, testConfig(f, ModeSocket))
	rec := connectSocket(t, f, a, nil)

	root := f.AddMessage(chPrivate, "", alice, "root")
	cases := []struct {
		ch, thread string
		mention    bool
		want       core.Visibility
	}{
		{chPublic, "", false, core.Public},
		{chPrivate, root, true, core.Private}, // app_mention only: conversations.info
		{chGroup, "", false, core.Private},
		{chMPIM, "", false, core.Private},
		{chDM, "", false, core.DM},
	}
	var ids []string
	for _, c := range cases {
		text := "hello"
		ts := f.AddMessage(c.ch, c.thread, alice, text)
		if c.mention {
			text = botMention(f) + " hello"
			ids = append(ids, f.PushEvent(f.AppMentionEvent(c.ch, alice, text, ts, c.thread)))
		} else {
			ids = append(ids, f.PushEvent(f.MessageEvent(c.ch, alice, text, ts, c.thread)))
		}
	}
	for _, id := range ids {
		f.WaitEventAcked(id, 3*time.Second)
	}
	evs := rec.events()
	if len(evs) != len(cases) {
		t.Fatalf("delivered %d, want %d", len(evs), len(cases))
	}
	byCh := map[string]core.Event{}
	for _, e := range evs {
		byCh[e.Scope.Channel] = e
	}
	for _, c := range cases {
		e := byCh[c.ch]
		if e.Visibility != c.want || e.Scope.Thread != c.thread {
			t.Errorf("%s: visibility %q thread %q, want %q %q", c.ch, e.Visibility, e.Scope.Thread, c.want, c.thread)
		}
	}
	if f.CallCount("conversations.info") != 1 {
		t.Errorf("conversations.info called %d times, want 1 (only for the app_mention)", f.CallCount("conversations.info"))
	}
}

// A block_actions click becomes a core.CardClick with the token and the
// clicker, and is acknowledged.
func TestSocketBlockActionsClick(t *testing.T) {
	f := newFake(t)
	a, _ := newAdapter(t, testConfig(f, ModeSocket))
	rec := connectSocket(t, f, a, nil)

	root := f.AddMessage(chPublic, "", alice, "please deploy")
	cardTS := f.AddMessage(chPublic, root, f.Config().BotUserID, "card")
	id := f.PushInteraction(f.BlockActionsJSON(slackfake.Click{
		Channel: chPublic, MessageTS: cardTS, ThreadTS: root, User: bob, UserName: "bob",
		BlockID: "card-42", ActionID: "approve", Value: "tok.abc123", Label: "Approve",
	}))
	if !f.WaitEventAcked(id, 3*time.Second) {
		t.Fatal("click not acknowledged")
	}
	clicks := rec.clicks()
	if len(clicks) != 1 {
		t.Fatalf("clicks = %+v", clicks)
	}
	c := clicks[0]
	if c.Card != "card-42" || c.Action != "approve" || c.Token != "tok.abc123" || c.By.ID != bob || c.By.Name != "bob" {
		t.Errorf("click = %+v", c)
	}
	if c.Scope != (core.Scope{Platform: "slack", Workspace: f.Config().TeamID, Channel: chPublic, Thread: root}) || c.At.IsZero() {
		t.Errorf("click scope/at = %+v %v", c.Scope, c.At)
	}
}

// Events the adapter does not deliver (reactions, unknown types) are
// acknowledged at once.
func TestSocketOtherEventsAcked(t *testing.T) {
	f := newFake(t)
	a, _ := newAdapter(t, testConfig(f, ModeSocket))
	rec := connectSocket(t, f, a, nil)
	ids := []string{
		f.PushEvent(map[string]any{"type": "reaction_added", "user": alice, "reaction": "eyes",
			"item": map[string]any{"type": "message", "channel": chPublic, "ts": "1.0"}, "event_ts": "1.0"}),
		f.PushEvent(map[string]any{"type": "some_future_event_type", "x": 1}),
	}
	for _, id := range ids {
		if !f.WaitEventAcked(id, 3*time.Second) {
			t.Fatalf("%s not acknowledged", id)
		}
	}
	if rec.callCount() != 0 {
		t.Fatalf("deliver called %d times", rec.callCount())
	}
}

// Connections dropped (and a polite disconnect) mid-stream: the adapter
// reconnects, re-resolves its identity, and every message is delivered
// exactly once.
func TestSocketReconnectMidStreamNothingLostNothingDoubled(t *testing.T) {
	f := newFake(t, func(c *slackfake.Config) { c.RedeliverAfter = 300 * time.Millisecond })
	a, _ := newAdapter(t, testConfig(f, ModeSocket))
	rec := connectSocket(t, f, a, func(ctx context.Context, n int, in core.Inbound) error {
		time.Sleep(2 * time.Millisecond)
		return nil
	})
	authBefore := f.AuthTests()

	const total = 60
	want := map[string]bool{}
	var ids []string
	for i := range total {
		ch := []string{chPublic, chGroup, chDM}[i%3]
		text := fmt.Sprintf("message %d", i)
		if i%5 == 0 && ch != chDM {
			text = botMention(f) + " " + text
		}
		ts, evs := f.Say(ch, "", alice, text)
		want[ch+"/"+ts] = true
		ids = append(ids, evs...)
		switch i {
		case 15, 40:
			f.DropConnections()
		case 28:
			f.RequestReconnect()
		}
		time.Sleep(3 * time.Millisecond)
	}
	for _, id := range ids {
		if !f.WaitEventAcked(id, 10*time.Second) {
			t.Fatalf("event %s never acknowledged", id)
		}
	}
	got := map[string]int{}
	for _, e := range rec.events() {
		got[e.Scope.Channel+"/"+e.MessageID]++
	}
	for k := range want {
		if got[k] != 1 {
			t.Errorf("message %s delivered %d times", k, got[k])
		}
	}
	if len(got) != len(want) {
		t.Errorf("delivered %d distinct messages, want %d", len(got), len(want))
	}
	if f.ConnectionsOpened() < 3 {
		t.Errorf("connections opened = %d, want reconnects", f.ConnectionsOpened())
	}
	waitUntil(t, 3*time.Second, "identity refresh after reconnect", func() bool { return f.AuthTests() >= authBefore+2 })
}

// Run returns when ctx ends, and leaves no goroutine behind.
func TestSocketRunStopsWithoutLeaks(t *testing.T) {
	f := newFake(t)
	before := runtime.NumGoroutine()
	a, _ := newAdapter(t, testConfig(f, ModeSocket))
	rec := newRecorder()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx, rec.deliver) }()
	f.WaitConnected(5 * time.Second)
	_, ids := f.Say(chPublic, "", alice, "hello")
	f.WaitEventAcked(ids[0], 3*time.Second)
	if _, err := a.Post(context.Background(), core.Outbound{Key: "k1", Scope: core.Scope{Platform: "slack", Channel: chPublic}, Text: "hi"}); err != nil {
		t.Fatal(err)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return")
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<20)
		t.Fatalf("%d goroutines before Run, %d after it returned:\n%s", before, n, buf[:runtime.Stack(buf, true)])
	}
}

// A bad app token is a clear error from Run, not a hang.
func TestSocketInvalidAppToken(t *testing.T) {
	f := newFake(t, func(c *slackfake.Config) { c.AppToken = "xapp-the-right-one" })
	a, _ := newAdapter(t, testConfig(f, ModeSocket))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := a.Run(ctx, newRecorder().deliver)
	if err == nil || !strings.Contains(err.Error(), "invalid_auth") {
		t.Fatalf("Run = %v, want an invalid_auth error", err)
	}
}

// A delivery stuck in one channel (a first append, a lease claim on a slow
// database) holds back that channel's later messages only: another
// channel's message is delivered and acknowledged meanwhile. C0OTHER000 is
// the channel eight fixed shards by FNV-1a put with chPublic, so one shard
// per few channels would fail this.
func TestSocketStuckChannelDelaysNoOtherChannel(t *testing.T) {
	const other = "C0OTHER000"
	f := newFake(t, func(c *slackfake.Config) { c.Channels[other] = "channel" })
	a, _ := newAdapter(t, testConfig(f, ModeSocket))
	release := make(chan struct{})
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	rec := connectSocket(t, f, a, func(ctx context.Context, n int, in core.Inbound) error {
		if in.Event != nil && in.Event.Scope.Channel == chPublic && strings.Contains(in.Event.Text, "stuck") {
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	})
	_, stuck := f.Say(chPublic, "", alice, "stuck here")
	waitUntil(t, 3*time.Second, "the stuck delivery", func() bool { return rec.callCount() >= 1 })
	_, after := f.Say(chPublic, "", alice, "after it, same channel")
	_, free := f.Say(other, "", bob, "another channel")
	if !f.WaitEventAcked(free[0], 2*time.Second) {
		t.Fatal("a message in another channel waited behind the stuck delivery")
	}
	if f.EventAcked(after[0]) {
		t.Fatal("the stuck channel's next message was acknowledged before the one ahead of it")
	}
	close(release)
	for _, id := range append(stuck, after...) {
		if !f.WaitEventAcked(id, 3*time.Second) {
			t.Fatalf("event %s never acknowledged", id)
		}
	}
	var texts []string
	for _, ev := range rec.events() {
		if ev.Scope.Channel == chPublic {
			texts = append(texts, ev.Text)
		}
	}
	if len(texts) != 2 || texts[0] != "stuck here" || texts[1] != "after it, same channel" {
		t.Fatalf("chPublic delivered %q, want the two messages in order", texts)
	}
}
