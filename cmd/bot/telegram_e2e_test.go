package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/adapters/telegram/telegramfake"
	"github.com/marlowe-bot/marlowe/core/fold"
	"github.com/marlowe-bot/marlowe/llm/llmtest"
)

var (
	tgForum = telegramfake.Chat{ID: -1002, Type: "supergroup", Title: "eng", IsForum: true}
	tgAlice = telegramfake.User{ID: 501, FirstName: "Alice", Username: "alice"}
	tgBob   = telegramfake.User{ID: 502, FirstName: "Bob", Username: "bob"}
	tgCarol = telegramfake.User{ID: 503, FirstName: "Carol", Username: "carol"}
)

// serveWith runs `bot serve` with getenv until the test ends (or stop).
func serveWith(t *testing.T, getenv func(string) string) (logs *syncBuffer, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	logs = &syncBuffer{}
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"serve"}, getenv, strings.NewReader(""), io.Discard, logs) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("serve returned %v\n%s", err, logs.String())
			}
		case <-time.After(15 * time.Second):
			t.Error("serve did not stop")
		}
	}
	t.Cleanup(stop)
	return logs, stop
}

func awaitSent(t *testing.T, f *telegramfake.Server, logs *syncBuffer, what string, match func(telegramfake.Sent) bool) telegramfake.Sent {
	t.Helper()
	var got telegramfake.Sent
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	err := f.Wait(ctx, func() bool {
		for _, s := range f.Sent() {
			if match(s) {
				got = s
				return true
			}
		}
		return false
	})
	if err != nil {
		t.Fatalf("no message for %s; sent: %+v\nlogs:\n%s", what, f.Sent(), logs.String())
	}
	return got
}

func countSent(f *telegramfake.Server, match func(telegramfake.Sent) bool) int {
	n := 0
	for _, s := range f.Sent() {
		if match(s) {
			n++
		}
	}
	return n
}

// TestServeTelegramPolling runs the composition root as an operator would:
// TELEGRAM_BOT_TOKEN and MARLOWE_TELEGRAM_API_URL against the local Bot API
// fake, long polling, an OpenAI-compatible model fake, the SQLite store. In
// a forum topic: a mention is answered as a reply in the topic; chatter is
// not; the same person's untagged follow-up is; a post elsewhere needs an
// approval card whose buttons are always answered; the approver's click
// resumes the run; a replayed and a forged click do nothing.
func TestServeTelegramPolling(t *testing.T) {
	t.Parallel()
	tg := telegramfake.New(telegramfake.Config{MaxPollWait: time.Second})
	t.Cleanup(tg.Close)
	model := llmtest.NewOpenAIServer(t)
	dir := t.TempDir()
	getenv := env(map[string]string{
		"MARLOWE_DATA_DIR":         dir,
		"MARLOWE_HTTP_ADDR":        "127.0.0.1:0",
		"TELEGRAM_BOT_TOKEN":       tg.Config().Token,
		"MARLOWE_TELEGRAM_API_URL": tg.URL(),
		"MARLOWE_MODEL_PROVIDER":   "openai",
		"MARLOWE_MODEL":            "fake-model",
		"MARLOWE_MODEL_BASE_URL":   model.URL,
	})
	logs, stop := serveWith(t, getenv)
	inTopic := func(s telegramfake.Sent) bool { return s.ChatID == tgForum.ID && s.Topic == 42 }

	// 1. A mention in topic 42 is answered as a reply, in the topic.
	model.Enqueue(llmtest.Text("Signups last week: 412, up 9%."))
	_, m1 := tg.Inject(telegramfake.Incoming{Chat: tgForum, Topic: 42, From: tgAlice, Text: "🚀 @marlowe_test_bot pull last week's signups"})
	answer := awaitSent(t, tg, logs, "the answer", func(s telegramfake.Sent) bool { return strings.Contains(s.Text, "412") })
	if !inTopic(answer) || answer.ReplyTo != m1 {
		t.Fatalf("answer sent to chat %d topic %d reply %d; want topic 42, reply to %d", answer.ChatID, answer.Topic, answer.ReplyTo, m1)
	}

	// 2. Someone else's chatter stays unanswered; 3. the same person's
	// untagged follow-up (inside the 6-minute window) is answered.
	tg.Inject(telegramfake.Incoming{Chat: tgForum, Topic: 42, From: tgCarol, Text: "lunch anyone?"})
	model.Enqueue(llmtest.Text("By region: EMEA 180, AMER 150, APAC 82."))
	_, m3 := tg.Inject(telegramfake.Incoming{Chat: tgForum, Topic: 42, From: tgAlice, Text: "break that down by region?"})
	follow := awaitSent(t, tg, logs, "the follow-up answer", func(s telegramfake.Sent) bool { return strings.Contains(s.Text, "EMEA 180") })
	if !inTopic(follow) || follow.ReplyTo != m3 {
		t.Fatalf("follow-up answer %+v; want topic 42, reply to %d", follow, m3)
	}

	// 4. Posting to another chat needs approval: a card with an inline
	// keyboard; nothing is posted there before the click.
	model.Enqueue(
		llmtest.Tools(llmtest.Call("call-1", "post_to_channel", `{"channel":"-1005","text":"Signups report: 412"}`)),
		llmtest.Text("Shared the report in ops."),
	)
	tg.Inject(telegramfake.Incoming{Chat: tgForum, Topic: 42, From: tgAlice, Text: "@marlowe_test_bot share the numbers with the ops chat"})
	card := awaitSent(t, tg, logs, "the approval card", func(s telegramfake.Sent) bool { return len(s.Keyboard) > 0 })
	if !inTopic(card) {
		t.Fatalf("card left the topic: %+v", card)
	}
	var approve string
	for _, row := range card.Keyboard {
		for _, b := range row {
			if len(b.CallbackData) > 64 {
				t.Fatalf("callback_data %d bytes", len(b.CallbackData))
			}
			// "Allow once" on a consent card (a send), "Approve" on an irreversible one.
			if l := strings.ToLower(b.Text); strings.Contains(l, "approve") || l == "allow once" {
				approve = b.CallbackData
			}
		}
	}
	if approve == "" {
		t.Fatalf("no approve button: %+v", card.Keyboard)
	}
	toOps := func(s telegramfake.Sent) bool { return s.ChatID == -1005 }
	if countSent(tg, toOps) != 0 {
		t.Fatal("posted before approval")
	}

	// A forged token: refused in the alert that answers the press (only the
	// clicker sees it), nothing posted, nothing done.
	answered := func(n int) {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		if err := tg.Wait(ctx, func() bool { return len(tg.Answers()) >= n }); err != nil {
			t.Fatalf("callback %d never answered (the button would spin)", n)
		}
	}
	tg.Click(tgForum.ID, card.MessageID, tgBob, approve[:len(approve)-3]+"AAA")
	answered(1)
	if an := tg.Answers()[0]; !an.ShowAlert || !strings.Contains(an.Text, "could not be verified") {
		t.Fatalf("forged click answered %+v: want the refusal as an alert\n%s", an, logs.String())
	}
	if n := countSent(tg, func(s telegramfake.Sent) bool { return strings.Contains(s.Text, "could not be verified") }); n != 0 {
		t.Fatal("the forged-click refusal was posted for everyone")
	}

	// The approver's click: answered, the run resumes, the post happens,
	// the card is edited in place without buttons.
	tg.Click(tgForum.ID, card.MessageID, tgAlice, approve)
	answered(2)
	awaitSent(t, tg, logs, "the approved post", func(s telegramfake.Sent) bool { return toOps(s) && strings.Contains(s.Text, "412") })
	awaitSent(t, tg, logs, "the final answer", func(s telegramfake.Sent) bool { return strings.Contains(s.Text, "Shared the report") })
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := tg.Wait(ctx, func() bool {
		for _, e := range tg.Edits() {
			if e.MessageID == card.MessageID && e.HasMarkup && len(e.Keyboard) == 0 {
				return true
			}
		}
		return false
	}); err != nil {
		t.Fatalf("card never edited to its resolution: %+v", tg.Edits())
	}

	// A replayed click: answered, refused, nothing posts twice.
	tg.Click(tgForum.ID, card.MessageID, tgAlice, approve)
	answered(3)
	awaitSent(t, tg, logs, "the replay refusal", func(s telegramfake.Sent) bool { return strings.Contains(s.Text, "already decided") })
	if n := countSent(tg, toOps); n != 1 {
		t.Fatalf("%d posts to the ops chat, want exactly 1", n)
	}
	if n := countSent(tg, func(s telegramfake.Sent) bool { return strings.Contains(s.Text, "412, up 9%") }); n != 1 {
		t.Fatalf("the first answer was sent %d times", n)
	}
	for _, s := range tg.Sent() {
		if s.ChatID == tgForum.ID && s.Topic != 42 {
			t.Fatalf("a message left its topic: %+v", s)
		}
	}
	if strings.Contains(logs.String(), "lunch anyone") || strings.Contains(logs.String(), tg.Config().Token) {
		t.Fatal("ignored chatter or the token reached the logs")
	}
	awaitPending(t, tg, 0)

	// The answers' latency from the message's arrival, the pacing waits
	// by method and the dropped decorations, for Telegram (issue 38).
	m := readyRE.FindStringSubmatch(logs.String())
	if m == nil {
		t.Fatalf("no ready address in the logs:\n%s", logs.String())
	}
	metrics := scrape(t, m[1])
	for _, k := range []string{
		`marlowe_answer_seconds_count{platform="telegram"}`,
		`marlowe_pacing_wait_seconds_count{method="sendMessage",platform="telegram"}`,
		`marlowe_pacing_wait_seconds_count{method="setMessageReaction",platform="telegram"}`,
	} {
		if metrics[k] < 1 {
			t.Errorf("%s = %v, want at least 1", k, metrics[k])
		}
	}
	if _, ok := metrics[`marlowe_outbound_decorations_dropped_total{platform="telegram"}`]; !ok {
		t.Error(`marlowe_outbound_decorations_dropped_total{platform="telegram"} missing`)
	}

	stop()
	out, err := runBot(t, env(map[string]string{"MARLOWE_DATA_DIR": dir}), "", "verify")
	if err != nil {
		t.Fatalf("verify: %v %s", err, out)
	}
	out, err = runBot(t, env(map[string]string{"MARLOWE_DATA_DIR": dir}), "", "replay", "--channel", "telegram//-1002:42")
	if err != nil {
		t.Fatal(err)
	}
	var st fold.ChannelState
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatal(err)
	}
	if st.Counts["message.received"] != 3 {
		t.Fatalf("journaled %d messages, want 3 (chatter must not be)", st.Counts["message.received"])
	}
}

func awaitPending(t *testing.T, tg *telegramfake.Server, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := tg.Wait(ctx, func() bool { return len(tg.Pending()) == n }); err != nil {
		t.Fatalf("pending updates %v, want %d", tg.Pending(), n)
	}
}

// TestServeTelegramWebhook: MARLOWE_TELEGRAM_MODE=webhook with
// MARLOWE_TELEGRAM_WEBHOOK_URL registers the webhook (with secret_token),
// Telegram's pushes are answered, a request without the secret gets 401,
// getUpdates is never called, and /telegram/status reports privacy mode.
func TestServeTelegramWebhook(t *testing.T) {
	tg := telegramfake.New(telegramfake.Config{})
	t.Cleanup(tg.Close)
	addr := freeAddr(t)
	hook := "http://" + addr + "/telegram/webhook"
	getenv := env(map[string]string{
		"MARLOWE_DATA_DIR":             t.TempDir(),
		"MARLOWE_HTTP_ADDR":            addr,
		"TELEGRAM_BOT_TOKEN":           tg.Config().Token,
		"MARLOWE_TELEGRAM_API_URL":     tg.URL(),
		"MARLOWE_TELEGRAM_MODE":        "webhook",
		"TELEGRAM_WEBHOOK_SECRET":      "e2e_secret-123",
		"MARLOWE_TELEGRAM_WEBHOOK_URL": hook,
	})
	logs, _ := serveWith(t, getenv)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := tg.Wait(ctx, func() bool { u, _ := tg.Webhook(); return u != "" }); err != nil {
		t.Fatalf("setWebhook never called:\n%s", logs.String())
	}
	if u, sec := tg.Webhook(); u != hook || sec != "e2e_secret-123" {
		t.Fatalf("webhook %q secret %q", u, sec)
	}
	// Offline model: the command grammar answers "help".
	_, m := tg.Inject(telegramfake.Incoming{Chat: telegramfake.Chat{ID: 501, Type: "private"}, From: tgAlice, Text: "/help"})
	reply := awaitSent(t, tg, logs, "the help answer", func(s telegramfake.Sent) bool { return s.ChatID == 501 })
	if reply.Topic != 0 || reply.Text == "" {
		t.Fatalf("reply %+v", reply)
	}
	_ = m
	awaitPending(t, tg, 0)

	req, _ := http.NewRequest(http.MethodPost, hook, strings.NewReader(`{"update_id":1}`))
	req.Header.Set("X-Telegram-Bot-Api-Secret-Token", "wrong")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("wrong secret: %d, want 401", resp.StatusCode)
	}
	resp, err = http.Get("http://" + addr + "/telegram/status")
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Ready       bool `json:"ready"`
		PrivacyMode bool `json:"privacy_mode"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&st)
	resp.Body.Close()
	if resp.StatusCode != 200 || !st.Ready || !st.PrivacyMode {
		t.Fatalf("status %d %+v: want ready with privacy mode on", resp.StatusCode, st)
	}
	if !strings.Contains(logs.String(), "privacy mode is on") {
		t.Fatal("privacy mode not logged")
	}
	if n := tg.CallCount("getUpdates"); n != 0 {
		t.Fatalf("getUpdates called %d times in webhook mode", n)
	}
}
