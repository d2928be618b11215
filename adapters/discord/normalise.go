package discord

import (
	"strconv"
	"strings"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/marlowe-bot/marlowe/core"
)

// Discord's permission bits used here.
const (
	permAdministrator = int64(discordgo.PermissionAdministrator) // 1 << 3
	permManageGuild   = int64(discordgo.PermissionManageGuild)   // 1 << 5
	permViewChannel   = int64(discordgo.PermissionViewChannel)   // 1 << 10
	permManageThreads = int64(discordgo.PermissionManageThreads) // 1 << 34
)

// where is a message's place as the mapping of ARCHITECTURE.md §5 reads it.
type where struct {
	scope core.Scope
	vis   core.Visibility
	// botRoles are the guild's roles managed for the bot (tags.bot_id):
	// a mention of one is a mention of the bot.
	botRoles map[string]bool
}

// chanInfo is what the adapter keeps of a channel: a value, never a shared
// pointer.
type chanInfo struct {
	typ    discordgo.ChannelType
	guild  string
	parent string // a thread's parent channel
	// everyoneDenied: a permission overwrite for @everyone (the role whose
	// id is the guild id) denies VIEW_CHANNEL, which makes it private.
	everyoneDenied bool
}

func infoOf(c *discordgo.Channel) chanInfo {
	ci := chanInfo{typ: c.Type, guild: c.GuildID, parent: c.ParentID}
	for _, o := range c.PermissionOverwrites {
		if o != nil && o.Type == discordgo.PermissionOverwriteTypeRole && o.ID == c.GuildID && o.Deny&permViewChannel != 0 {
			ci.everyoneDenied = true
		}
	}
	return ci
}

func isThread(t discordgo.ChannelType) bool {
	switch t {
	case discordgo.ChannelTypeGuildPublicThread, discordgo.ChannelTypeGuildPrivateThread, discordgo.ChannelTypeGuildNewsThread:
		return true
	}
	return false
}

// subtypeOf maps a message type to core.Event.Subtype: "" for a person's
// post (DEFAULT, REPLY), a name for everything Discord generates itself
// (joins, pins, thread notices, boosts...), which the filter ignores.
func subtypeOf(t discordgo.MessageType) string {
	switch t {
	case discordgo.MessageTypeDefault, discordgo.MessageTypeReply:
		return ""
	case discordgo.MessageTypeChatInputCommand, discordgo.MessageTypeContextMenuCommand:
		return "command_response"
	case discordgo.MessageTypeGuildMemberJoin:
		return "channel_join"
	case discordgo.MessageTypeChannelPinnedMessage:
		return "pinned_item"
	case discordgo.MessageTypeThreadCreated:
		return "thread_created"
	case discordgo.MessageTypeThreadStarterMessage:
		return "thread_starter"
	}
	return "system_" + strconv.Itoa(int(t))
}

// Subtype of an edit (MESSAGE_UPDATE): ignored by the filter, like Slack's.
const subtypeEdit = "message_changed"

// normalise builds the core.Event for m at w. replyToBot says whether the
// message it references is one of the bot's (resolved by the caller).
func normalise(m *discordgo.Message, w where, self identity, replyToBot bool) core.Event {
	ev := core.Event{
		Scope:      w.scope,
		Visibility: w.vis,
		MessageID:  m.ID,
		Subtype:    subtypeOf(m.Type),
		At:         m.Timestamp,
	}
	ev.Scope.Platform = Platform
	if ev.At.IsZero() {
		ev.At = snowflakeTime(m.ID)
	}
	if u := m.Author; u != nil {
		ev.Author = core.Person{
			ID:   u.ID,
			Name: displayName(u, m.Member),
			// Discord echoes the bot's own posts; webhooks, system
			// messages and crossposts (a followed channel's post copied
			// in: its author is not in this channel) are not people
			// either.
			IsBot: u.Bot || u.System || m.WebhookID != "" || m.Flags&discordgo.MessageFlagsIsCrossPosted != 0 ||
				(self.userID != "" && u.ID == self.userID),
		}
	}
	seen := map[string]bool{}
	add := func(k core.MentionKind, id string) {
		if id == "" || seen[string(k)+id] {
			return
		}
		seen[string(k)+id] = true
		ev.Mentions = append(ev.Mentions, core.Mention{Kind: k, ID: id})
	}
	// By id, from Discord's resolved lists; never by matching a name.
	for _, u := range m.Mentions {
		if u == nil {
			continue
		}
		add(core.MentionUser, u.ID)
		if self.userID != "" && u.ID == self.userID {
			ev.MentionsBot = true
		}
	}
	var ownRoles []string
	for _, r := range m.MentionRoles {
		if w.botRoles[r] {
			// The bot's managed role: addressed to the bot, not to a
			// group, so it is not listed as one.
			ev.MentionsBot = true
			ownRoles = append(ownRoles, r)
			continue
		}
		add(core.MentionGroup, r)
	}
	if m.MentionEveryone {
		if strings.Contains(m.Content, "@here") && !strings.Contains(m.Content, "@everyone") {
			add(core.MentionBroadcast, "here")
		} else {
			add(core.MentionBroadcast, "everyone")
		}
	}
	if ref := m.MessageReference; ref != nil && ref.MessageID != "" && (ref.Type == discordgo.MessageReferenceTypeDefault) {
		ev.ReplyTo = ref.MessageID
		ev.ReplyToBot = replyToBot
	}
	ev.Text = stripLeadingMention(m.Content, self.userID, ownRoles...)
	ev.Attachments = attachmentsOf(m.Attachments, m.Flags&discordgo.MessageFlagsIsVoiceMessage != 0)
	return ev
}

// displayName prefers the guild nickname, then the global display name.
func displayName(u *discordgo.User, mem *discordgo.Member) string {
	if mem != nil && mem.Nick != "" {
		return mem.Nick
	}
	if u.GlobalName != "" {
		return u.GlobalName
	}
	return u.Username
}

// stripLeadingMention removes the bot's mention token (<@ID> or <@!ID>, or
// <@&ROLE> of one of its managed roles) from the start of text; other
// mentions stay.
func stripLeadingMention(text, botID string, botRoles ...string) string {
	var tokens []string
	if botID != "" {
		tokens = append(tokens, "<@"+botID+">", "<@!"+botID+">")
	}
	for _, r := range botRoles {
		tokens = append(tokens, "<@&"+r+">")
	}
	t := strings.TrimLeft(text, " \t\n")
	for _, tok := range tokens {
		rest, ok := strings.CutPrefix(t, tok)
		if !ok {
			continue
		}
		rest = strings.TrimLeft(rest, " \t")
		if strings.HasPrefix(rest, ":") || strings.HasPrefix(rest, ",") {
			rest = rest[1:]
		}
		return strings.TrimLeft(rest, " \t\n")
	}
	return text
}

// discordEpoch is 2015-01-01T00:00:00Z in milliseconds.
const discordEpoch = 1420070400000

// snowflakeTime is the creation time encoded in a Discord id (zero when
// malformed).
func snowflakeTime(id string) time.Time {
	n, err := strconv.ParseUint(id, 10, 64)
	if err != nil || n == 0 {
		return time.Time{}
	}
	return time.UnixMilli(int64(n>>22) + discordEpoch).UTC()
}

// visibilityOf maps a channel (and, for a thread, its parent) to the
// filter's visibility: DMs are DMs, group DMs and private threads private,
// a guild channel private when @everyone cannot view it, a public thread
// as its parent.
func visibilityOf(c chanInfo, parent *chanInfo) core.Visibility {
	switch {
	case c.typ == discordgo.ChannelTypeDM:
		return core.DM
	case c.typ == discordgo.ChannelTypeGroupDM:
		return core.Private
	case c.typ == discordgo.ChannelTypeGuildPrivateThread:
		return core.Private
	case isThread(c.typ):
		if parent == nil {
			return core.Private // unknown parent: the stricter reading
		}
		return visibilityOf(*parent, nil)
	case c.everyoneDenied:
		return core.Private
	}
	return core.Public
}

// normName folds a name for the look-alike comparison.
func normName(s string) string {
	return strings.ToLower(strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(s), "@")))
}

// threadName is the name of a thread the bot opens on a message: its
// first line, shortened (Discord allows 100 characters).
func threadName(text string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(text), "\n")
	line = strings.TrimSpace(line)
	if line == "" {
		return "Marlowe"
	}
	return truncateRunes(line, 80)
}
