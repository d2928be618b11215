package telegram

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/adapters/telegram/telegramfake"
	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/intent"
)

// The captured payloads (public SDK fixtures and published captures, with
// their sources in MANIFEST.tsv and README.md) are committed under
// testdata/telegram-payloads/, copied from the project's shared folder, so a clone
// anywhere tests them. MARLOWE_SHARED_DIR=<dir> plays <dir>/telegram-payloads/
// instead (a newer capture set; a file without a row fails the table test).
func telegramPayloads(t *testing.T) string {
	t.Helper()
	folder := filepath.Join("testdata", "telegram-payloads")
	if base := os.Getenv("MARLOWE_SHARED_DIR"); base != "" {
		folder = filepath.Join(base, "telegram-payloads")
	}
	if _, err := os.Stat(filepath.Join(folder, "MANIFEST.tsv")); err != nil {
		t.Fatalf("payload folder %s: %v", folder, err)
	}
	return folder
}

// twant is what one captured update must become. The zero value: nothing
// delivered.
type twant struct {
	event      bool
	channel    string
	vis        core.Visibility
	subtype    string
	isBot      bool
	mentions   int
	mentionsMe bool
	replyTo    string
	replyToBot bool
	reason     string // the filter's decision, no window open
	click      string // a card click with this token was delivered
	// attach is the delivered attachments, "kind type WxH size" each,
	// joined by "; " ("" = none).
	attach string
}

// dm, inGroup: a person's post delivered to the filter.
func dm(chat string) twant { return twant{event: true, channel: chat, vis: core.DM, reason: "dm"} }

func withFiles(w twant, attach string) twant { w.attach = attach; return w }

func inGroup(chat, reason string) twant {
	return twant{event: true, channel: chat, vis: core.Public, reason: reason}
}

// notice: delivered, and the filter ignores it: a service message or
// media without text has some subtype (which one is the adapter's
// naming, not a rule), unless sub says exactly; a bot's post may have none.
func notice(chat string, vis core.Visibility, isBot bool, sub ...string) twant {
	w := twant{event: true, channel: chat, vis: vis, subtype: "*", isBot: isBot, reason: "not-a-person-message"}
	if len(sub) > 0 {
		w.subtype = sub[0]
	}
	return w
}

const (
	payloadBotID = 7000000001 // no captured id collides with it
	forumChat    = "-1001234567489"
	opiForum     = "-1001971186208"
)

// Every captured update in ../shared/telegram-payloads/ (none written by
// this project) POSTed to the webhook of the real adapter, with a fresh
// update_id (the captures' are placeholders or repeat), and checked as the
// engine receives it and through the intent filter. What each must become
// is written from the rules (ARCHITECTURE.md §5, the Telegram column of the
// mapping, PLATFORMS.md). A file without a row fails the test.
func TestCapturedTelegramPayloads(t *testing.T) {
	dir := telegramPayloads(t)
	cases := []struct {
		file, name string
		bot        string // an id in the file that stands for our bot
		want       twant
	}{
		// Private chats.
		{file: "tlx-private-text.json", want: dm("408258968")},
		{file: "tlx-private-text-link-preview.json", want: dm("218485655")},
		{file: "tlx-private-text-cyrillic-emoji.json", want: dm("250918540")},
		// A photo's largest size (under the cap) is its attachment; the
		// caption is the text.
		{file: "tlx-private-photo-caption-entities.json", want: withFiles(dm("27433968"), "photo image/jpeg 1280x1280 162061")},
		{file: "nut-private-entities-utf16.json", want: dm("321654")},
		{file: "tpi-private-forward-legacy-2016.json", want: dm("12312312")},
		// Another bot's command in a DM is still a DM to us.
		{file: "nut-private-bot-command-with-username.json", want: twant{event: true, channel: "10081232", vis: core.DM, mentions: 1, reason: "dm"}},
		// A photo without a caption is a post like any other: an attachment
		// neither routes nor silences (here the DM routes it).
		{file: "tlx-private-photo.json", want: withFiles(dm("250918540"), "photo image/jpeg 962x719 75245")},
		{file: "tlx-private-sticker-animated.json", want: notice("250918540", core.DM, false)},
		{file: "tlx-private-video-media-group.json", want: withFiles(dm("250918540"), "video video/mp4 512x640 1381334")},
		{file: "nut-game-via-bot.json", want: notice("12345", core.DM, true)},
		{file: "nut-edited-message-reply.json", want: twant{event: true, channel: "999999999", vis: core.DM, subtype: "edit", replyTo: "23758", reason: "not-a-person-message"}},
		// Groups.
		{file: "bpb-group-text-mention-url.json", name: "another user", want: twant{event: true, channel: "-5251554348", vis: core.Public, mentions: 1, reason: "addressed-to-others"}},
		{file: "bpb-group-text-mention-url.json", name: "our bot", bot: "6993779075", want: twant{event: true, channel: "-5251554348", vis: core.Public, mentionsMe: true, reason: "mention"}},
		{file: "tlx-supergroup-reply-bot-command.json", // a bare /report names no bot; a reply thread is not a topic
			want: twant{event: true, channel: "-1001293752024", vis: core.Public, replyTo: "134545", reason: "no-window"}},
		{file: "tlx-supergroup-dice.json", want: notice("-1001276785818", core.Public, false)},
		{file: "tlx-supergroup-story.json", want: notice("-1001293752024", core.Public, false)},
		{file: "tlx-supergroup-pinned-message.json", want: notice("-1001276785818", core.Public, false)},
		{file: "rej-new-chat-members-bot-added.json", want: notice("-4008338308", core.Public, false)},
		{file: "tgrs-group-migrate-to-chat-id.json", want: notice("-216055857", core.Public, false)},
		{file: "tlx-group-migrate-to-supergroup.json", want: notice("-599075523", core.Public, false)},
		{file: "tgrs-supergroup-migrate-from-chat-id.json", want: notice("-1001113717682", core.Public, false)},
		// Anonymous admins post as the group (GroupAnonymousBot, sender_chat).
		{file: "tlx-anon-admin-forward-origin-chat.json", want: notice("-1001160242915", core.Public, true, "")},
		{file: "tlx-supergroup-migrate-from-group.json", want: notice("-1001555296434", core.Public, true)},
		{file: "tlx-supergroup-video-chat-started.json", want: notice("-1001331354980", core.Public, true)},
		// Forums: a topic is a channel of its own; the General topic is the
		// chat; the topic's creation notice is not a reply.
		{file: "nut-forum-topic-message.json", want: inGroup(forumChat+":33", "no-window")},
		{file: "nut-forum-other-topic-message.json", want: inGroup(forumChat+":33", "no-window")},
		{file: "nut-forum-general-topic-message.json", want: inGroup(forumChat, "no-window")},
		{file: "nut-forum-general-topic-reply.json", want: twant{event: true, channel: forumChat, vis: core.Public, replyTo: "66", reason: "no-window"}},
		{file: "tlx-forum-topic-message.json", want: inGroup("-1001847508954:4", "no-window")},
		{file: "tlx-forum-topic-created.json", want: notice("-1001847508954:4", core.Public, false)},
		{file: "tlx-forum-topic-closed.json", want: notice("-1001840751935", core.Public, false)},
		{file: "opi-forum-topic-created-by-bot.json", want: notice(opiForum+":2446", core.Public, true)},
		{file: "opi-forum-topic-edited-in-topic.json", want: notice(opiForum+":2446", core.Public, true)},
		{file: "opi-forum-topic-closed-in-topic.json", want: notice(opiForum+":2446", core.Public, true)},
		{file: "opi-forum-general-topic-closed.json", want: notice(opiForum, core.Public, true)},
		{file: "opi-forum-general-topic-reopened.json", want: notice(opiForum, core.Public, true)},
		{file: "opi-forum-general-topic-renamed.json", want: notice(opiForum, core.Public, true)},
		{file: "opi-forum-general-topic-hidden.json", want: notice(opiForum, core.Public, true)},
		{file: "opi-forum-general-topic-unhidden.json", want: notice(opiForum, core.Public, true)},
		// Channel posts have no people writing: nothing delivered.
		{file: "opi-channel-post-pinned-message.json"},
		// Button presses on a message: a click (the engine verifies the
		// token); without a message (inline mode): answered, not delivered.
		{file: "nut-callback-query-private.json", want: twant{click: "thedata"}},
		{file: "nut-callback-query-inaccessible-message.json", want: twant{click: "thedata"}},
		{file: "tgrs-callback-query-channel-message.json", want: twant{click: "test"}},
		{file: "ptbi-callback-query-inline-message.json"},
		{file: "tgdoc-callback-query-inline-example.json"},
		// Kinds Marlowe does not subscribe to: confirmed, nothing delivered.
		{file: "tgrs-inline-query.json"},
		{file: "tlx-message-reaction-user.json"},
		{file: "tlx-message-reaction-anonymous-chat.json"},
		{file: "tlx-message-reaction-count-channel.json"},
		{file: "tlx-my-chat-member-kicked-private.json"},
		{file: "agm-my-chat-member-private-blocked.json"},
		{file: "agm-my-chat-member-forum-added.json"},
		{file: "agm-my-chat-member-promoted-custom-title.json"},
		{file: "agm-my-chat-member-removed-from-supergroup.json"},
		{file: "rej-my-chat-member-added-to-group.json"},
		{file: "rej-my-chat-member-promoted-admin.json"},
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]bool{}
	for _, c := range cases {
		rows[c.file] = true
	}
	for _, f := range files {
		if !rows[filepath.Base(f)] {
			t.Errorf("%s has no row: write what the rules say it must become", filepath.Base(f))
		}
		delete(rows, filepath.Base(f))
	}
	for f := range rows {
		t.Errorf("a row names %s, which is not in %s", f, dir)
	}

	f := newFake(t, func(c *telegramfake.Config) { c.BotID = payloadBotID })
	a, _ := newAdapter(t, testConfig(f, ModeWebhook))
	a.answerWait = 50 * time.Millisecond
	rec := newRecorder()
	run(t, a, rec.deliver)
	srv := webhookServer(t, a)
	eventually(t, "Run serving the webhook", func() bool {
		return postUpdate(t, srv.URL, "s3cret_Token-abc", `{"update_id": 1, "channel_post": {"message_id": 1, "date": 1, "chat": {"id": -5, "type": "channel"}}}`, true) == http.StatusOK
	})
	for i, c := range cases {
		name := strings.TrimSuffix(c.file, ".json")
		if c.name != "" {
			name += "/" + c.name
		}
		t.Run(name, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join(dir, c.file))
			if err != nil {
				t.Fatal(err)
			}
			if c.bot != "" {
				raw = []byte(strings.ReplaceAll(string(raw), c.bot, fmt.Sprint(payloadBotID)))
			}
			var u map[string]json.RawMessage
			if err := json.Unmarshal(raw, &u); err != nil {
				t.Fatal(err)
			}
			u["update_id"], _ = json.Marshal(100 + i)
			body, _ := json.Marshal(u)
			evs, clicks := len(rec.events()), len(rec.clicks())
			if st := postUpdate(t, srv.URL, "s3cret_Token-abc", string(body), true); st != http.StatusOK {
				t.Fatalf("webhook answered %d, want 200 (confirmed)", st)
			}
			gotEvs, gotClicks := rec.events()[evs:], rec.clicks()[clicks:]
			w := c.want
			switch {
			case w.click != "":
				if len(gotClicks) != 1 || gotClicks[0].Token != w.click || len(gotEvs) != 0 {
					t.Fatalf("delivered clicks %+v events %+v, want one click %q", gotClicks, gotEvs, w.click)
				}
				return
			case !w.event:
				if len(gotEvs)+len(gotClicks) != 0 {
					t.Fatalf("delivered %+v %+v, want nothing", gotEvs, gotClicks)
				}
				return
			}
			if len(gotEvs) != 1 || len(gotClicks) != 0 {
				t.Fatalf("delivered events %+v clicks %+v, want one event", gotEvs, gotClicks)
			}
			ev := gotEvs[0]
			got := fmt.Sprintf("ch=%s thread=%q vis=%s sub=%q isbot=%v mentions=%d me=%v reply=%q replybot=%v",
				ev.Scope.Channel, ev.Scope.Thread, ev.Visibility, ev.Subtype, ev.Author.IsBot, len(ev.Mentions), ev.MentionsBot, ev.ReplyTo, ev.ReplyToBot)
			exp := fmt.Sprintf("ch=%s thread=%q vis=%s sub=%q isbot=%v mentions=%d me=%v reply=%q replybot=%v",
				w.channel, "", w.vis, w.subtype, w.isBot, w.mentions, w.mentionsMe, w.replyTo, w.replyToBot)
			if w.subtype == "*" && ev.Subtype != "" {
				exp = strings.Replace(exp, `sub="*"`, fmt.Sprintf("sub=%q", ev.Subtype), 1)
			}
			if got != exp {
				t.Errorf("normalised\n got %s\nwant %s", got, exp)
			}
			var files []string
			for _, a := range ev.Attachments {
				files = append(files, fmt.Sprintf("%s %s %dx%d %d", a.Kind, a.Type, a.Width, a.Height, a.Size))
				if a.Ref == "" || a.ID == "" {
					t.Errorf("attachment without id or reference: %+v", a)
				}
			}
			if g := strings.Join(files, "; "); g != w.attach {
				t.Errorf("attachments %q, want %q", g, w.attach)
			}
			if ev.Author.ID == "" || ev.At.IsZero() || ev.Scope.Platform != Platform || ev.MessageID == "" {
				t.Errorf("author/time/platform/id missing: %+v", ev)
			}
			if d := intent.Decide(ev, intent.Windows{}, time.Now()); d.Reason.String() != w.reason {
				t.Errorf("decision %s, want %s", d.Reason, w.reason)
			}
		})
	}
}
