package discord

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/marlowe-bot/marlowe/adapters/discord/discordfake"
	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/intent"
)

// Each rule of the platform mapping (ARCHITECTURE.md §5, Discord column),
// as Discord-shaped payloads through the fake gateway and the real adapter,
// then through the intent filter's pure decision.
func TestNormalisationMapping(t *testing.T) {
	f := newFake(t, discordfake.Config{EchoPosts: true})
	rec := newRecorder()
	a := startAdapter(t, f, rec.deliver)
	bot := f.Bot()
	ctx := context.Background()

	// A message of the bot's at the top level of general, to reply to.
	botMsg, err := a.Post(ctx, core.Outbound{Key: "k-bot-1", Scope: core.Scope{Platform: Platform, Workspace: guildID, Channel: general}, Text: "I am the bot", Priority: core.PriorityHigh})
	if err != nil {
		t.Fatal(err)
	}
	aliceMsg := f.Say(discordfake.Msg{Channel: general, Author: alice, Content: "a message of alice"})
	const dmChan = "400000000000000001"

	type want struct {
		vis        core.Visibility
		channel    string
		thread     string
		mentions   []core.MentionKind
		mentionBot bool
		replyToBot bool
		isBot      bool
		subtype    string
		text       string
		reason     string // intent decision with no window open
		reasonOpen string // with the thread's window open ("" = same)
	}
	cases := []struct {
		name string
		msg  discordfake.Msg
		want *want // nil: must not be delivered
	}{
		{"mention at top level", discordfake.Msg{Channel: general, Author: alice, Content: "<@" + bot.ID + "> pull the numbers"},
			&want{vis: core.Public, channel: general, mentions: []core.MentionKind{core.MentionUser}, mentionBot: true, text: "pull the numbers", reason: "mention"}},
		{"nickname mention form", discordfake.Msg{Channel: general, Author: alice, Content: "<@!" + bot.ID + ">, status?"},
			&want{vis: core.Public, channel: general, mentions: []core.MentionKind{core.MentionUser}, mentionBot: true, text: "status?", reason: "mention"}},
		{"name without the id is no mention", discordfake.Msg{Channel: general, Author: alice, Content: "@marlowe are you there"},
			&want{vis: core.Public, channel: general, text: "@marlowe are you there", reason: "no-window"}},
		{"untagged chatter", discordfake.Msg{Channel: general, Author: carol, Content: "lunch?"},
			&want{vis: core.Public, channel: general, text: "lunch?", reason: "no-window"}},
		{"untagged in a thread", discordfake.Msg{Channel: oldThread, Author: bob, Content: "and EMEA?"},
			&want{vis: core.Public, channel: general, thread: oldThread, text: "and EMEA?", reason: "no-window", reasonOpen: "thread-window"}},
		{"private channel untagged", discordfake.Msg{Channel: secret, Author: alice, Content: "quiet here"},
			&want{vis: core.Private, channel: secret, text: "quiet here", reason: "private-no-window"}},
		{"private channel mention", discordfake.Msg{Channel: secret, Author: alice, Content: "<@" + bot.ID + "> hi"},
			&want{vis: core.Private, channel: secret, mentions: []core.MentionKind{core.MentionUser}, mentionBot: true, text: "hi", reason: "mention"}},
		{"private thread", discordfake.Msg{Channel: privThr, Author: alice, Content: "in private"},
			&want{vis: core.Private, channel: general, thread: privThr, text: "in private", reason: "private-no-window", reasonOpen: "private-no-window"}},
		{"DM", discordfake.Msg{Channel: dmChan, Author: bob, Content: "hello"},
			&want{vis: core.DM, channel: dmChan, text: "hello", reason: "dm"}},
		{"role mention", discordfake.Msg{Channel: general, Author: alice, Content: "<@&" + roleDev + "> deploy?"},
			&want{vis: core.Public, channel: general, mentions: []core.MentionKind{core.MentionGroup}, text: "<@&" + roleDev + "> deploy?", reason: "addressed-to-others"}},
		{"@everyone", discordfake.Msg{Channel: general, Author: alice, Content: "@everyone standup"},
			&want{vis: core.Public, channel: general, mentions: []core.MentionKind{core.MentionBroadcast}, text: "@everyone standup", reason: "addressed-to-others"}},
		{"@here in a thread", discordfake.Msg{Channel: oldThread, Author: alice, Content: "@here look"},
			&want{vis: core.Public, channel: general, thread: oldThread, mentions: []core.MentionKind{core.MentionBroadcast}, text: "@here look", reason: "addressed-to-others", reasonOpen: "addressed-to-others"}},
		{"another user", discordfake.Msg{Channel: oldThread, Author: alice, Content: "<@" + bob.ID + "> can you?"},
			&want{vis: core.Public, channel: general, thread: oldThread, mentions: []core.MentionKind{core.MentionUser}, text: "<@" + bob.ID + "> can you?", reason: "addressed-to-others", reasonOpen: "addressed-to-others"}},
		{"the bot and another user", discordfake.Msg{Channel: general, Author: alice, Content: "<@" + bob.ID + "> <@" + bot.ID + "> both"},
			&want{vis: core.Public, channel: general, mentions: []core.MentionKind{core.MentionUser, core.MentionUser}, mentionBot: true, text: "<@" + bob.ID + "> <@" + bot.ID + "> both", reason: "mention"}},
		{"reply to the bot outside a thread", discordfake.Msg{Channel: general, Author: bob, Content: "why?", ReplyTo: botMsg.ID},
			&want{vis: core.Public, channel: general, replyToBot: true, text: "why?", reason: "reply-to-bot"}},
		{"reply to a person", discordfake.Msg{Channel: general, Author: bob, Content: "agreed", ReplyTo: aliceMsg},
			&want{vis: core.Public, channel: general, text: "agreed", reason: "no-window"}},
		{"another bot", discordfake.Msg{Channel: general, Author: otherBot, Content: "<@" + bot.ID + "> ping"},
			&want{vis: core.Public, channel: general, mentions: []core.MentionKind{core.MentionUser}, mentionBot: true, isBot: true, text: "ping", reason: "not-a-person-message"}},
		{"a webhook", discordfake.Msg{Channel: general, Author: discordfake.User{ID: "500000000000000001", Username: "hook"}, WebhookID: "500000000000000001", Content: "build failed"},
			&want{vis: core.Public, channel: general, isBot: true, text: "build failed", reason: "not-a-person-message"}},
		{"system message (member join)", discordfake.Msg{Channel: general, Author: carol, Type: int(discordgo.MessageTypeGuildMemberJoin)},
			&want{vis: core.Public, channel: general, subtype: "channel_join", reason: "not-a-person-message"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			id := f.Say(tc.msg)
			rec.waitFor(t, tc.name, func() bool {
				return slices.ContainsFunc(rec.events(), func(e core.Event) bool { return e.MessageID == id })
			})
			evs := rec.events()
			ev := evs[slices.IndexFunc(evs, func(e core.Event) bool { return e.MessageID == id })]
			w := tc.want
			var kinds []core.MentionKind
			for _, m := range ev.Mentions {
				kinds = append(kinds, m.Kind)
			}
			got := fmt.Sprintf("vis=%s ch=%s thread=%s mentions=%v bot=%v reply=%v isbot=%v sub=%q text=%q ws=%s",
				ev.Visibility, ev.Scope.Channel, ev.Scope.Thread, kinds, ev.MentionsBot, ev.ReplyToBot, ev.Author.IsBot, ev.Subtype, ev.Text, ev.Scope.Workspace)
			ws := guildID
			if w.vis == core.DM {
				ws = ""
			}
			exp := fmt.Sprintf("vis=%s ch=%s thread=%s mentions=%v bot=%v reply=%v isbot=%v sub=%q text=%q ws=%s",
				w.vis, w.channel, w.thread, w.mentions, w.mentionBot, w.replyToBot, w.isBot, w.subtype, w.text, ws)
			if got != exp {
				t.Fatalf("normalised\n got %s\nwant %s", got, exp)
			}
			if ev.Scope.Platform != Platform || ev.Author.ID != tc.msg.Author.ID || ev.At.IsZero() {
				t.Fatalf("scope/author/time: %+v", ev)
			}
			now := time.Now()
			if d := intent.Decide(ev, intent.Windows{}, now); d.Reason.String() != w.reason {
				t.Errorf("decision with no window: %s, want %s", d.Reason, w.reason)
			}
			if w.thread != "" {
				open := w.reasonOpen
				if d := intent.Decide(ev, intent.Windows{ThreadUntil: now.Add(time.Minute)}, now); d.Reason.String() != open {
					t.Errorf("decision with the thread window open: %s, want %s", d.Reason, open)
				}
			}
		})
	}

	t.Run("the bot's own echo", func(t *testing.T) {
		i := slices.IndexFunc(rec.events(), func(e core.Event) bool { return e.MessageID == botMsg.ID })
		if i < 0 {
			t.Fatal("the echo of the bot's post was not delivered")
		}
		if ev := rec.events()[i]; !ev.Author.IsBot || ev.Author.ID != bot.ID {
			t.Fatalf("echo not marked as the bot's: %+v", ev.Author)
		}
	})

	t.Run("edits are not delivered", func(t *testing.T) {
		f.Edit(general, aliceMsg, "<@"+bot.ID+"> edited to mention the bot")
		sentinel := f.Say(discordfake.Msg{Channel: general, Author: alice, Content: "after the edit"})
		rec.waitFor(t, "sentinel", func() bool { _, ok := rec.eventByText("after the edit"); return ok })
		n := 0
		for _, e := range rec.events() {
			if e.MessageID == aliceMsg {
				n++
			}
			if e.MessageID == sentinel {
				break
			}
		}
		if n != 1 {
			t.Fatalf("message %s delivered %d times; the edit must not be delivered", aliceMsg, n)
		}
	})
}

// Pure pieces of the mapping that need no gateway.
func TestVisibilityOf(t *testing.T) {
	pub := chanInfo{typ: discordgo.ChannelTypeGuildText}
	priv := chanInfo{typ: discordgo.ChannelTypeGuildText, everyoneDenied: true}
	for _, tc := range []struct {
		name   string
		c      chanInfo
		parent *chanInfo
		want   core.Visibility
	}{
		{"text channel", pub, nil, core.Public},
		{"@everyone denied", priv, nil, core.Private},
		{"DM", chanInfo{typ: discordgo.ChannelTypeDM}, nil, core.DM},
		{"group DM", chanInfo{typ: discordgo.ChannelTypeGroupDM}, nil, core.Private},
		{"public thread of public", chanInfo{typ: discordgo.ChannelTypeGuildPublicThread}, &pub, core.Public},
		{"public thread of private", chanInfo{typ: discordgo.ChannelTypeGuildPublicThread}, &priv, core.Private},
		{"private thread", chanInfo{typ: discordgo.ChannelTypeGuildPrivateThread}, &pub, core.Private},
		{"thread of unknown parent", chanInfo{typ: discordgo.ChannelTypeGuildPublicThread}, nil, core.Private},
	} {
		if got := visibilityOf(tc.c, tc.parent); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
	// An overwrite for another role, or one allowing VIEW_CHANNEL, is not private.
	c := &discordgo.Channel{GuildID: "g", PermissionOverwrites: []*discordgo.PermissionOverwrite{
		{ID: "other", Type: discordgo.PermissionOverwriteTypeRole, Deny: permViewChannel},
		{ID: "g", Type: discordgo.PermissionOverwriteTypeRole, Allow: permViewChannel},
	}}
	if infoOf(c).everyoneDenied {
		t.Error("a deny on another role made the channel private")
	}
}

func TestStripLeadingMention(t *testing.T) {
	for in, want := range map[string]string{
		"<@42> hi":       "hi",
		"<@!42>: hi":     "hi",
		"  <@42>, hi":    "hi",
		"<@420> hi":      "<@420> hi",
		"hi <@42>":       "hi <@42>",
		"<@43> <@42> hi": "<@43> <@42> hi",
	} {
		if got := stripLeadingMention(in, "42"); got != want {
			t.Errorf("strip(%q) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[string]string{
		"<@&7> hi":      "hi",
		"<@&8> hi":      "<@&8> hi",
		"<@42>: hi":     "hi",
		"hi <@&7>":      "hi <@&7>",
		"<@&70> <@&7>x": "<@&70> <@&7>x",
	} {
		if got := stripLeadingMention(in, "42", "7"); got != want {
			t.Errorf("strip(%q, role 7) = %q, want %q", in, got, want)
		}
	}
}
