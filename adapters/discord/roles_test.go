package discord

import (
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/adapters/discord/discordfake"
	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/intent"
)

// People often pick the bot's managed role from the "@" autocomplete
// instead of its user: a mention of the role whose tags.bot_id is the bot
// counts as a mention of the bot, learnt from GUILD_CREATE and kept up with
// GUILD_ROLE_CREATE / UPDATE / DELETE (and read from GET guilds/{id} when
// the gateway has not told). Another bot's managed role is a group like
// any other.
func TestManagedRoleMentionIsAMention(t *testing.T) {
	const (
		botRole   = "300000000000000030"
		otherRole = "300000000000000031"
		lateRole  = "300000000000000032"
	)
	bot := discordfake.User{ID: "100000000000000001", Username: "marlowe"}
	g := testGuild()
	g.Roles = append(g.Roles,
		discordfake.Role{ID: botRole, BotID: bot.ID},
		discordfake.Role{ID: otherRole, BotID: otherBot.ID})
	f := newFake(t, discordfake.Config{Bot: bot, Guilds: []discordfake.Guild{g}})
	rec := newRecorder()
	startAdapter(t, f, rec.deliver)

	// check says text (with role mentions) in general and checks the
	// filter's decision on what was delivered.
	check := func(what, content, wantText, wantReason string) {
		t.Helper()
		id := f.Say(discordfake.Msg{Channel: general, Author: alice, Content: content})
		rec.waitFor(t, what, func() bool {
			for _, e := range rec.events() {
				if e.MessageID == id {
					return true
				}
			}
			return false
		})
		var ev core.Event
		for _, e := range rec.events() {
			if e.MessageID == id {
				ev = e
			}
		}
		if d := intent.Decide(ev, intent.Windows{}, time.Now()); d.Reason.String() != wantReason || ev.Text != wantText {
			t.Errorf("%s: decided %s with text %q, want %s with %q (event %+v)", what, d.Reason, ev.Text, wantReason, wantText, ev)
		}
	}
	check("the bot's managed role", "<@&"+botRole+"> pull the numbers", "pull the numbers", "mention")
	check("another bot's managed role", "<@&"+otherRole+"> pull the numbers", "<@&"+otherRole+"> pull the numbers", "addressed-to-others")
	check("the bot's role and a plain role", "<@&"+roleDev+"> and <@&"+botRole+"> both", "<@&"+roleDev+"> and <@&"+botRole+"> both", "mention")

	// GUILD_ROLE_CREATE: a new managed role (the bot re-added) counts.
	f.SetRole(guildID, discordfake.Role{ID: lateRole, BotID: bot.ID})
	check("a role created later", "<@&"+lateRole+"> hi", "hi", "mention")
	// GUILD_ROLE_UPDATE without the tag, GUILD_ROLE_DELETE: no longer the bot.
	f.SetRole(guildID, discordfake.Role{ID: lateRole})
	check("a role whose tag went", "<@&"+lateRole+"> hi", "<@&"+lateRole+"> hi", "addressed-to-others")
	f.DeleteRole(guildID, botRole)
	check("a deleted role", "<@&"+botRole+"> hi", "<@&"+botRole+"> hi", "addressed-to-others")

	// The guild goes unavailable (GUILD_DELETE) and its roles are
	// forgotten; a role mention reads them with GET guilds/{id}.
	guildReads := func() int {
		n := 0
		for _, c := range f.Calls() {
			if c.Method == "GET" && c.Path == "guilds/"+guildID {
				n++
			}
		}
		return n
	}
	if n := guildReads(); n != 0 {
		t.Errorf("GET guilds/{id} read %d times while GUILD_CREATE told the roles", n)
	}
	f.SetRole(guildID, discordfake.Role{ID: botRole, BotID: bot.ID})
	f.Dispatch("GUILD_DELETE", map[string]any{"id": guildID, "unavailable": true})
	check("after the guild's roles were forgotten", "<@&"+botRole+"> again", "again", "mention")
	if n := guildReads(); n != 1 {
		t.Errorf("GET guilds/{id} read %d times after GUILD_DELETE, want 1", n)
	}
}
