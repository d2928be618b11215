package telegram

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/adapters/telegram/telegramfake"
	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/chatcommand"
	"github.com/marlowe-bot/marlowe/core/coretest"
	"github.com/marlowe-bot/marlowe/intent"
	"github.com/marlowe-bot/marlowe/internal/testengine"
)

// TestTypingSendsChatAction: "typing…" goes to the scope's chat, in its
// forum topic when it has one; a reply target is not a topic.
func TestTypingSendsChatAction(t *testing.T) {
	f := newFake(t)
	a, _ := newAdapter(t, testConfig(f, ModePolling))
	ctx := context.Background()
	for _, sc := range []core.Scope{
		{Platform: Platform, Channel: "-1001"},
		{Platform: Platform, Channel: "-1002:42"},
		{Platform: Platform, Channel: "555", Thread: "77"},
	} {
		if err := a.Typing(ctx, sc); err != nil {
			t.Fatalf("Typing(%+v): %v", sc, err)
		}
	}
	want := []telegramfake.ChatAction{{ChatID: -1001, Action: "typing"}, {ChatID: -1002, Topic: 42, Action: "typing"}, {ChatID: 555, Action: "typing"}}
	got := f.ChatActions()
	if len(got) != len(want) {
		t.Fatalf("chat actions %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i].ChatID != want[i].ChatID || got[i].Topic != want[i].Topic || got[i].Action != want[i].Action {
			t.Errorf("chat action %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	if a.TypingEvery() <= 0 || a.TypingEvery() >= 5*time.Second {
		t.Errorf("TypingEvery %s: a chat action lasts 5 s, so it must be asked again sooner", a.TypingEvery())
	}
	if err := a.Typing(ctx, core.Scope{Platform: "slack", Channel: "C1"}); err == nil {
		t.Error("Typing accepted another platform's scope")
	}
}

// TestCommandMenuSetAtStart: polling and webhook replicas alike set the
// menu for private chats and for groups at start, from the grammar's
// bare commands; a second start sets the same menu again.
func TestCommandMenuSetAtStart(t *testing.T) {
	for _, mode := range []Mode{ModePolling, ModeWebhook} {
		t.Run(string(mode), func(t *testing.T) {
			f := newFake(t)
			for i := 1; i <= 2; i++ {
				a, _ := newAdapter(t, testConfig(f, mode))
				stop := run(t, a, newRecorder().deliver)
				awaitFake(t, f, "setMyCommands for both scopes", func() bool { return f.CallCount("setMyCommands") == 2*i })
				stop()
			}
			var want []string
			for _, m := range chatcommand.Menu() {
				want = append(want, m.Name+" — "+m.Description)
			}
			for _, sc := range []string{"all_private_chats", "all_group_chats"} {
				var got []string
				for _, c := range f.Commands(sc) {
					got = append(got, c.Command+" — "+c.Description)
				}
				if strings.Join(got, "\n") != strings.Join(want, "\n") {
					t.Errorf("%s menu:\n%s\nwant:\n%s", sc, strings.Join(got, "\n"), strings.Join(want, "\n"))
				}
				if !strings.Contains(strings.Join(got, "\n"), "status — ") {
					t.Errorf("%s menu has no status", sc)
				}
			}
			if f.Commands("default") != nil {
				t.Errorf("the default scope was set too: %+v", f.Commands("default"))
			}
		})
	}
}

// TestCommandMenuFailureIsNotFatal: setMyCommands failed (its answer lost;
// a 429 is now waited out like any call's): a warning, and the bot
// receives as usual.
func TestCommandMenuFailureIsNotFatal(t *testing.T) {
	f := newFake(t)
	f.LoseResponses("setMyCommands", 2)
	_, rec, logs := polling(t, f)
	f.Inject(telegramfake.Incoming{Chat: telegramfake.Chat{ID: 42, Type: "private"}, From: telegramfake.User{ID: 42, FirstName: "Alice"}, Text: "hello"})
	rec.await(t, "the message after a failed setMyCommands", func() bool { return len(rec.events()) == 1 })
	if !strings.Contains(logs.String(), "setMyCommands failed") {
		t.Errorf("failure not logged:\n%s", logs)
	}
}

// TestGroupCommandWithBotUsername: in a group Telegram sends a menu
// command as /status@<bot username>. A captured supergroup update with its
// command replaced reaches the grammar as "status", addressed to the bot.
func TestGroupCommandWithBotUsername(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(telegramPayloads(t), "tlx-supergroup-reply-bot-command.json"))
	if err != nil {
		t.Fatal(err)
	}
	f := newFake(t) // username marlowe_test_bot
	a, _ := newAdapter(t, testConfig(f, ModeWebhook))
	rec := newRecorder()
	run(t, a, rec.deliver)
	srv := webhookServer(t, a)
	for i, typed := range []string{"/status@marlowe_test_bot", "/status@Marlowe_Test_Bot", "/status"} {
		var u map[string]any
		if err := json.Unmarshal(raw, &u); err != nil {
			t.Fatal(err)
		}
		m := u["message"].(map[string]any)
		m["text"] = typed
		m["entities"].([]any)[0].(map[string]any)["length"] = len(typed)
		u["update_id"] = 500 + i
		body, _ := json.Marshal(u)
		eventually(t, "the webhook taking the update", func() bool {
			return postUpdate(t, srv.URL, "s3cret_Token-abc", string(body), true) == http.StatusOK
		})
		rec.await(t, typed, func() bool { return len(rec.events()) == i+1 })
		ev := rec.events()[i]
		if ev.Text != "status" || chatcommand.Parse(ev.Text).Kind != chatcommand.Status {
			t.Errorf("%s reached the grammar as %q", typed, ev.Text)
		}
		addressed := typed != "/status" // a bare command may be for any bot in the group
		if ev.MentionsBot != addressed {
			t.Errorf("%s: MentionsBot %v, want %v", typed, ev.MentionsBot, addressed)
		}
		if addressed {
			if d := intent.Decide(ev, intent.Windows{}, time.Now()); d.Reason.String() != "mention" {
				t.Errorf("%s: the filter decided %s, want mention", typed, d.Reason)
			}
		}
	}
}

// TestTypingWhileARunWorks, end to end: a message in a forum topic, a
// model call that lasts until Telegram shows "typing…" in that topic, then
// the answer; the chat action precedes the answer.
func TestTypingWhileARunWorks(t *testing.T) {
	f := newFake(t)
	a, logs := newAdapter(t, testConfig(f, ModePolling))
	m := coretest.NewScriptedModel(coretest.Text("all green"))
	m.OnCall = func(ctx context.Context, n int, v core.View) {
		if err := f.Wait(ctx, func() bool { return len(f.ChatActions()) > 0 }); err != nil {
			t.Errorf("no chat action while the model worked: %v", err)
		}
	}
	eng, _ := testengine.Start(t, a, m, logs.logger())
	run(t, a, eng.Deliver)
	forum := telegramfake.Chat{ID: -1003, Type: "supergroup", IsForum: true}
	f.Inject(telegramfake.Incoming{Chat: forum, Topic: 42, From: telegramfake.User{ID: 7, FirstName: "Alice"}, Text: "@marlowe_test_bot how is the build?"})
	awaitFake(t, f, "the answer", func() bool {
		for _, s := range f.Sent() {
			if s.Text == "all green" {
				return true
			}
		}
		return false
	})
	if err := eng.WaitIdle(context.Background()); err != nil {
		t.Fatal(err)
	}
	acts := f.ChatActions()
	if len(acts) == 0 || acts[0].ChatID != -1003 || acts[0].Topic != 42 || acts[0].Action != "typing" {
		t.Fatalf("chat actions %+v, want typing in -1003 topic 42", acts)
	}
	var order []string
	for _, c := range f.Calls() {
		if c.Method == "sendChatAction" || c.Method == "sendMessage" && c.Params.Get("text") == "all green" {
			order = append(order, c.Method)
		}
	}
	if order[len(order)-1] != "sendMessage" {
		t.Errorf("typing after the answer: %q", order)
	}
}
