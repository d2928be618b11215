package slack

import (
	"strconv"
	"strings"
	"time"

	"github.com/slack-go/slack"

	"github.com/marlowe-bot/marlowe/core"
)

// Platform is the platform name in scopes and channel keys.
const Platform = "slack"

// normSubtype maps a Slack subtype to core.Event.Subtype: "" for plain posts
// and for the subtypes that are a person's real post (file_share,
// thread_broadcast), the Slack subtype otherwise (message_changed,
// message_deleted, message_replied, channel_join, channel_leave, bot_message,
// …), which the intent filter ignores.
func normSubtype(s string) string {
	switch s {
	case "file_share", "thread_broadcast":
		return ""
	}
	return s
}

// visibilityOfType maps an Events API channel_type.
func visibilityOfType(channelType string) (core.Visibility, bool) {
	switch channelType {
	case "channel":
		return core.Public, true
	case "group", "mpim":
		return core.Private, true
	case "im":
		return core.DM, true
	}
	return "", false
}

// visibilityFallback guesses from the id when neither the event, the cache nor
// conversations.info could tell. D… is a DM, G… a (legacy) private channel or
// group DM. C… is usually public, but private channels created since 2021 also
// get C ids, so an unknown C… is treated as Private: the stricter reading (a
// private channel never opens windows for untagged messages).
func visibilityFallback(channel string) core.Visibility {
	switch {
	case strings.HasPrefix(channel, "D"):
		return core.DM
	default:
		return core.Private
	}
}

// threadOf returns the thread root for a message: "" for a top-level message
// (including a thread's own root, whose thread_ts equals its ts).
func threadOf(ts, threadTS string) string {
	if threadTS == "" || threadTS == ts {
		return ""
	}
	return threadTS
}

// parseTS turns "1700000000.123456" into a time; zero when malformed.
func parseTS(ts string) time.Time {
	sec, frac, _ := strings.Cut(ts, ".")
	s, err := strconv.ParseInt(sec, 10, 64)
	if err != nil {
		return time.Time{}
	}
	var ns int64
	if frac != "" {
		if len(frac) > 9 {
			frac = frac[:9]
		}
		f, err := strconv.ParseInt(frac, 10, 64)
		if err == nil {
			for i := len(frac); i < 9; i++ {
				f *= 10
			}
			ns = f
		}
	}
	return time.Unix(s, ns).UTC()
}

// parseMentions extracts the addressees of a message from Slack's mention
// tokens: <@U…> and <@U…|name> (users, by id), <!subteam^S…> (user groups)
// and <!here>, <!channel>, <!everyone> (broadcasts). Each addressee appears
// once, in text order.
func parseMentions(text string) []core.Mention {
	var out []core.Mention
	seen := map[string]bool{}
	add := func(k core.MentionKind, id string) {
		if id == "" || seen[string(k)+id] {
			return
		}
		seen[string(k)+id] = true
		out = append(out, core.Mention{Kind: k, ID: id})
	}
	for i := 0; i < len(text); i++ {
		if text[i] != '<' {
			continue
		}
		end := strings.IndexByte(text[i:], '>')
		if end < 0 {
			break
		}
		tok := text[i+1 : i+end]
		i += end
		if bar := strings.IndexByte(tok, '|'); bar >= 0 {
			tok = tok[:bar]
		}
		switch {
		case strings.HasPrefix(tok, "@"):
			if id := tok[1:]; isSlackID(id) {
				add(core.MentionUser, id)
			}
		case strings.HasPrefix(tok, "!subteam^"):
			if id := tok[len("!subteam^"):]; isSlackID(id) {
				add(core.MentionGroup, id)
			}
		case tok == "!here" || tok == "!channel" || tok == "!everyone":
			add(core.MentionBroadcast, tok[1:])
		}
	}
	return out
}

// isSlackID reports whether s looks like a Slack object id (upper-case
// letters and digits).
func isSlackID(s string) bool {
	if len(s) < 2 || len(s) > 32 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < 'A' || c > 'Z') && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// stripLeadingMention removes the bot's own mention token from the start of
// text ("<@BOT> remember x" → "remember x", also "<@BOT|name>: x"). Other
// mentions, and the bot's mention elsewhere in the text, stay.
func stripLeadingMention(text, botID string) string {
	if botID == "" {
		return text
	}
	t := strings.TrimLeft(text, " \t\n")
	if !strings.HasPrefix(t, "<@"+botID) {
		return text
	}
	rest := t[len("<@"+botID):]
	switch {
	case strings.HasPrefix(rest, ">"):
		rest = rest[1:]
	case strings.HasPrefix(rest, "|"):
		end := strings.IndexByte(rest, '>')
		if end < 0 {
			return text
		}
		rest = rest[end+1:]
	default:
		return text // a longer id that merely starts with ours
	}
	rest = strings.TrimLeft(rest, " \t")
	if strings.HasPrefix(rest, ":") || strings.HasPrefix(rest, ",") {
		rest = rest[1:]
	}
	return strings.TrimLeft(rest, " \t\n")
}

// message is the platform-neutral shape both event kinds (app_mention,
// message) and conversations.replies results are reduced to.
type message struct {
	team, channel, channelType string
	ts, threadTS               string
	user, botID, username      string
	subtype                    string
	text                       string
	edited                     bool
	files                      []slack.File
}

// slackbotID is Slack's built-in Slackbot. Its messages (reminders, custom
// responses, notices in a DM) carry no bot_id, but no person wrote them.
const slackbotID = "USLACKBOT"

// normalise builds the core.Event for m. vis must already be resolved.
func normalise(m message, vis core.Visibility, self identity) core.Event {
	ev := core.Event{
		Scope: core.Scope{
			Platform:  Platform,
			Workspace: m.team,
			Channel:   m.channel,
			Thread:    threadOf(m.ts, m.threadTS),
		},
		Visibility: vis,
		MessageID:  m.ts,
		Author: core.Person{
			ID:    m.user,
			IsBot: m.botID != "" || m.user == slackbotID || (self.userID != "" && m.user == self.userID) || m.subtype == "bot_message",
		},
		Subtype: normSubtype(m.subtype),
		At:      parseTS(m.ts),
	}
	if ev.Author.ID == "" && m.botID != "" {
		ev.Author.ID = m.botID
	}
	if ev.Author.IsBot && m.username != "" {
		ev.Author.Name = m.username
	}
	if m.edited && ev.Subtype == "" {
		// An app_mention fired for an edit of an older message: an edit,
		// which the filter ignores like message_changed.
		ev.Subtype = "message_changed"
	}
	ev.Mentions = parseMentions(m.text)
	for _, mn := range ev.Mentions {
		if mn.Kind == core.MentionUser && self.userID != "" && mn.ID == self.userID {
			ev.MentionsBot = true
		}
	}
	ev.Text = stripLeadingMention(m.text, self.userID)
	ev.Attachments = attachmentsOf(m.files)
	return ev
}

// attachmentsOf keeps the files Slack hosts (mode hosted or snippet/post,
// with a private download URL); external files (Google Drive links and
// such) and tombstones of deleted files have nothing Slack serves.
func attachmentsOf(files []slack.File) []core.Attachment {
	var out []core.Attachment
	for _, f := range files {
		ref := f.URLPrivateDownload
		if ref == "" {
			ref = f.URLPrivate
		}
		if f.ID == "" || ref == "" || f.IsExternal || f.Mode == "tombstone" || f.Mode == "external" {
			continue
		}
		name := f.Name
		if name == "" {
			name = f.Title
		}
		out = append(out, core.Attachment{
			ID: f.ID, Name: name, Type: f.Mimetype, Size: int64(f.Size), Ref: ref,
			Width: f.OriginalW, Height: f.OriginalH,
		})
	}
	return out
}
