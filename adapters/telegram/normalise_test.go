package telegram

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/adapters/telegram/telegramfake"
	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/intent"
)

// Every kind of message in ARCHITECTURE.md's Telegram column, injected into
// the fake Bot API, fetched by the real SDK over getUpdates, and checked as
// the engine receives it. Cases that must not be delivered at all are
// followed by a sentinel: when the sentinel arrives, the case was skipped.
func TestNormalisationTable(t *testing.T) {
	f := newFake(t)
	a, rec, _ := polling(t, f)
	bot := f.Bot()

	// A message of the bot's, to reply to.
	botRef, err := a.Post(context.Background(), core.Outbound{Scope: core.Scope{Platform: Platform, Channel: "-1001"}, Text: "I am here."})
	if err != nil {
		t.Fatal(err)
	}
	botMsg := atoi(t, botRef.ID)
	_, aliceMsg := f.Inject(telegramfake.Incoming{Chat: group, From: alice, Text: "plain words"})
	rec.await(t, "the first message", func() bool { return len(rec.events()) == 1 })

	type want struct {
		channel    string
		vis        core.Visibility
		subtype    string
		text       string
		mentions   []string
		mentionsMe bool
		replyToBot bool
		replyTo    bool
		isBot      bool
		skipped    bool
	}
	cases := []struct {
		name string
		in   telegramfake.Incoming
		want want
	}{
		{"mention in a group", telegramfake.Incoming{Chat: group, From: alice, Text: "@marlowe_test_bot what's up?"},
			want{channel: "-1001", vis: core.Public, text: "what's up?", mentionsMe: true}},
		{"mention in other case", telegramfake.Incoming{Chat: group, From: alice, Text: "@Marlowe_Test_Bot hi"},
			want{channel: "-1001", vis: core.Public, text: "hi", mentionsMe: true}},
		{"mention after emoji (UTF-16 offsets)", telegramfake.Incoming{Chat: group, From: alice, Text: "🚀🎉 ship it @marlowe_test_bot?"},
			want{channel: "-1001", vis: core.Public, text: "🚀🎉 ship it @marlowe_test_bot?", mentionsMe: true}},
		{"username that only starts with the bot's", telegramfake.Incoming{Chat: group, From: alice, Text: "@marlowe_test_bot2 hi"},
			want{channel: "-1001", vis: core.Public, text: "@marlowe_test_bot2 hi", mentions: []string{"@marlowe_test_bot2"}}},
		{"another user mentioned", telegramfake.Incoming{Chat: group, From: alice, Text: "😀 @bob can you look"},
			want{channel: "-1001", vis: core.Public, text: "😀 @bob can you look", mentions: []string{"@bob"}}},
		{"both mentioned", telegramfake.Incoming{Chat: group, From: alice, Text: "@bob and @marlowe_test_bot"},
			want{channel: "-1001", vis: core.Public, text: "@bob and @marlowe_test_bot", mentions: []string{"@bob"}, mentionsMe: true}},
		{"text_mention of the bot", telegramfake.Incoming{Chat: group, From: alice, Text: "Marlowe, status?",
			Entities: []telegramfake.Entity{{Type: "text_mention", Offset: 0, Length: 7, User: &bot}}},
			want{channel: "-1001", vis: core.Public, text: "status?", mentionsMe: true}},
		{"text_mention of a person without a username", telegramfake.Incoming{Chat: group, From: alice, Text: "🙂 Bob, status?",
			Entities: []telegramfake.Entity{{Type: "text_mention", Offset: 3, Length: 3, User: &bob}}},
			want{channel: "-1001", vis: core.Public, text: "🙂 Bob, status?", mentions: []string{"502"}}},
		{"reply to the bot", telegramfake.Incoming{Chat: group, From: bob, Text: "and then?", ReplyTo: botMsg},
			want{channel: "-1001", vis: core.Public, text: "and then?", replyTo: true, replyToBot: true}},
		{"reply to a person", telegramfake.Incoming{Chat: group, From: bob, Text: "agreed", ReplyTo: aliceMsg},
			want{channel: "-1001", vis: core.Public, text: "agreed", replyTo: true}},
		{"forum topic is its own channel; its root is no reply", telegramfake.Incoming{Chat: forum, From: alice, Text: "@marlowe_test_bot in topic", Topic: 42},
			want{channel: "-1002:42", vis: core.Public, text: "in topic", mentionsMe: true}},
		{"forum General topic is the chat", telegramfake.Incoming{Chat: forum, From: alice, Text: "general chatter"},
			want{channel: "-1002", vis: core.Public, text: "general chatter"}},
		{"legacy group", telegramfake.Incoming{Chat: legacy, From: alice, Text: "old group"},
			want{channel: "-77", vis: core.Public, text: "old group"}},
		{"private chat", telegramfake.Incoming{Chat: aliceDM, From: alice, Text: "hello"},
			want{channel: "501", vis: core.DM, text: "hello"}},
		{"edit", telegramfake.Incoming{Chat: group, From: alice, Text: "plain words, edited", Edit: aliceMsg},
			want{channel: "-1001", vis: core.Public, subtype: "edit", text: "plain words, edited"}},
		{"bot author", telegramfake.Incoming{Chat: group, From: other, Text: "@marlowe_test_bot beep"},
			want{channel: "-1001", vis: core.Public, text: "beep", mentionsMe: true, isBot: true}},
		{"/cmd@otherbot", telegramfake.Incoming{Chat: group, From: alice, Text: "/status@other_bot now"},
			want{channel: "-1001", vis: core.Public, text: "/status@other_bot now", mentions: []string{"@other_bot"}}},
		{"/cmd@ourbot", telegramfake.Incoming{Chat: group, From: alice, Text: "/remember@marlowe_test_bot the deploy is at 10"},
			want{channel: "-1001", vis: core.Public, text: "remember the deploy is at 10", mentionsMe: true}},
		{"caption with a mention", telegramfake.Incoming{Chat: group, From: alice, Text: "@marlowe_test_bot look", Caption: true},
			want{channel: "-1001", vis: core.Public, text: "look", mentionsMe: true}},
		{"service message", telegramfake.Incoming{Chat: group, From: bob, Service: true},
			want{channel: "-1001", vis: core.Public, subtype: "service"}},
		{"broadcast channel post", telegramfake.Incoming{Chat: bcast, From: alice, Text: "news"},
			want{skipped: true}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := len(rec.events())
			_, id := f.Inject(tc.in)
			if tc.want.skipped {
				f.Inject(telegramfake.Incoming{Chat: group, From: alice, Text: "sentinel"})
			}
			rec.await(t, "the event", func() bool { return len(rec.events()) > before })
			ev := rec.events()[before]
			if tc.want.skipped {
				if ev.Text != "sentinel" {
					t.Fatalf("delivered %+v, want it skipped", ev)
				}
				return
			}
			if tc.in.Edit == 0 && ev.MessageID != itoa(id) {
				t.Errorf("message id %q, want %d", ev.MessageID, id)
			}
			var ms []string
			for _, m := range ev.Mentions {
				ms = append(ms, m.ID)
			}
			got := want{channel: ev.Scope.Channel, vis: ev.Visibility, subtype: ev.Subtype, text: ev.Text, mentions: ms,
				mentionsMe: ev.MentionsBot, replyToBot: ev.ReplyToBot, replyTo: ev.ReplyTo != "", isBot: ev.Author.IsBot}
			if got.channel != tc.want.channel || got.vis != tc.want.vis || got.subtype != tc.want.subtype ||
				got.text != tc.want.text || !slices.Equal(got.mentions, tc.want.mentions) || got.mentionsMe != tc.want.mentionsMe ||
				got.replyToBot != tc.want.replyToBot || got.replyTo != tc.want.replyTo || got.isBot != tc.want.isBot {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
			if ev.Scope.Platform != Platform || ev.Scope.Workspace != "" || ev.Scope.Thread != "" {
				t.Errorf("scope %+v: want platform telegram, no workspace, no thread", ev.Scope)
			}
			if ev.Scope.Validate() != nil {
				t.Errorf("scope does not validate: %v", ev.Scope.Validate())
			}
		})
	}
}

func TestPrivateChatsByConfiguration(t *testing.T) {
	f := newFake(t)
	cfg := testConfig(f, ModePolling)
	cfg.PrivateChats = []int64{group.ID}
	a, _ := newAdapter(t, cfg)
	rec := newRecorder()
	run(t, a, rec.deliver)
	f.Inject(telegramfake.Incoming{Chat: group, From: alice, Text: "a"})
	f.Inject(telegramfake.Incoming{Chat: legacy, From: alice, Text: "b"})
	rec.await(t, "two events", func() bool { return len(rec.events()) == 2 })
	// Two chats: delivered side by side, in either order.
	for _, ev := range rec.events() {
		want := core.Public // the other group
		if ev.Text == "a" {
			want = core.Private // the configured chat
		}
		if ev.Visibility != want {
			t.Errorf("%q in %s: %v, want %v", ev.Text, ev.Scope.Channel, ev.Visibility, want)
		}
	}
}

// Normalised Telegram events through the real intent filter: the pinned
// rules hold with Telegram's mapping (top-level window per chat or topic,
// no thread windows, others' mentions and /cmd@otherbot ignored).
func TestIntentWithTelegramMapping(t *testing.T) {
	f := newFake(t)
	a, rec, _ := polling(t, f)
	now := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	filter := intent.NewFilter(intent.NewMemoryStore(clock), clock)
	ctx := context.Background()
	next := func(in telegramfake.Incoming) core.Event {
		t.Helper()
		before := len(rec.events())
		f.Inject(in)
		rec.await(t, "event", func() bool { return len(rec.events()) > before })
		return rec.events()[before]
	}
	decide := func(ev core.Event) (bool, string) {
		t.Helper()
		d, err := filter.Decide(ctx, ev)
		if err != nil {
			t.Fatal(err)
		}
		return d.Route, d.Reason.String()
	}
	answer := func(ev core.Event) {
		t.Helper()
		// What the engine does: answer as a reply (Thread = the message).
		ref, err := a.Post(ctx, core.Outbound{Scope: core.Scope{Platform: Platform, Channel: ev.Scope.Channel, Thread: ev.MessageID}, Text: "ok"})
		if err != nil {
			t.Fatal(err)
		}
		if err := filter.Posted(ctx, intent.Post{Channel: ev.Scope.Key(), Thread: ev.MessageID, MessageID: ref.ID, At: now,
			Answering: ev.MessageID, AnsweringUser: ev.Author.ID, AnsweringTop: true}, core.Policy{}); err != nil {
			t.Fatal(err)
		}
	}
	steps := []struct {
		name    string
		in      telegramfake.Incoming
		advance time.Duration
		route   bool
		answer  bool
	}{
		{"chatter before anything", telegramfake.Incoming{Chat: group, From: alice, Text: "morning all"}, 0, false, false},
		{"mention", telegramfake.Incoming{Chat: group, From: alice, Text: "@marlowe_test_bot is the deploy done?"}, 0, true, true},
		{"same person, untagged, inside 6 min", telegramfake.Incoming{Chat: group, From: alice, Text: "and the rollback?"}, 3 * time.Minute, true, false},
		{"another person, untagged", telegramfake.Incoming{Chat: group, From: bob, Text: "lunch?"}, 0, false, false},
		{"same person addressing someone else", telegramfake.Incoming{Chat: group, From: alice, Text: "@bob see above"}, 0, false, false},
		{"same person, /cmd@otherbot", telegramfake.Incoming{Chat: group, From: alice, Text: "/status@other_bot"}, 0, false, false},
		{"same person, untagged, after 6 min", telegramfake.Incoming{Chat: group, From: alice, Text: "thanks"}, 4 * time.Minute, false, false},
		{"mention in topic 42", telegramfake.Incoming{Chat: forum, From: alice, Text: "@marlowe_test_bot hi", Topic: 42}, 0, true, true},
		{"follow-up in another topic", telegramfake.Incoming{Chat: forum, From: alice, Text: "and here?", Topic: 43}, time.Minute, false, false},
		{"follow-up in forum General", telegramfake.Incoming{Chat: forum, From: alice, Text: "and here?"}, 0, false, false},
		{"follow-up in the same topic", telegramfake.Incoming{Chat: forum, From: alice, Text: "and here?", Topic: 42}, 0, true, false},
		{"private chat", telegramfake.Incoming{Chat: aliceDM, From: alice, Text: "hello"}, 0, true, false},
		{"bot mentioning us", telegramfake.Incoming{Chat: group, From: other, Text: "@marlowe_test_bot ping"}, 0, false, false},
		{"edit of a mention", telegramfake.Incoming{Chat: group, From: alice, Text: "@marlowe_test_bot edited", Edit: 101}, 0, false, false},
	}
	for _, st := range steps {
		now = now.Add(st.advance)
		ev := next(st.in)
		route, reason := decide(ev)
		if route != st.route {
			t.Errorf("%s: route=%v (%s), want %v", st.name, route, reason, st.route)
		}
		if st.answer {
			answer(ev)
		}
	}
}

func atoi(t testing.TB, s string) int64 {
	t.Helper()
	n, _, err := parseChannel(s)
	if err != nil {
		t.Fatalf("not a number: %q", s)
	}
	return n
}
