package sandbox

import (
	"strings"

	"github.com/marlowe-bot/marlowe/core"
)

// token is one mention token found in a message's text.
type token struct {
	kind core.MentionKind
	id   string
	// start and end are byte offsets of the whole token ("<@alice>").
	start, end int
}

// scanTokens finds the mention tokens in text: <@USER>, <!subteam^GROUP>
// and <!here>, <!channel>, <!everyone>. Anything else in angle brackets is
// text. Ids are not resolved here.
func scanTokens(text string) []token {
	var out []token
	for i := 0; i < len(text); {
		open := strings.IndexByte(text[i:], '<')
		if open < 0 {
			break
		}
		open += i
		closing := strings.IndexByte(text[open:], '>')
		if closing < 0 {
			break
		}
		closing += open
		body := text[open+1 : closing]
		i = open + 1
		var t token
		switch {
		case strings.HasPrefix(body, "@"):
			t = token{kind: core.MentionUser, id: body[1:]}
		case strings.HasPrefix(body, "!subteam^"):
			t = token{kind: core.MentionGroup, id: strings.TrimPrefix(body, "!subteam^")}
		case body == "!here" || body == "!channel" || body == "!everyone":
			t = token{kind: core.MentionBroadcast, id: body[1:]}
		default:
			continue
		}
		if !validID(t.id) {
			continue
		}
		t.start, t.end = open, closing+1
		out = append(out, t)
		i = closing + 1
	}
	return out
}

func validID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for _, r := range id {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
		default:
			return false
		}
	}
	return true
}

// resolveMentions returns the message's addressees, resolved against the
// directory by id: the users (the bot excluded), groups and broadcasts it
// mentions, each once, in order; and whether it mentions the bot. Tokens
// naming nobody in the directory are not mentions.
func (d *directory) resolveMentions(text string) (mentions []core.Mention, mentionsBot bool) {
	seen := map[core.Mention]bool{}
	for _, t := range scanTokens(text) {
		switch t.kind {
		case core.MentionUser:
			if t.id == d.bot.ID {
				mentionsBot = true
				continue
			}
			if _, ok := d.person(t.id); !ok {
				continue
			}
		case core.MentionGroup:
			if !d.group(t.id) {
				continue
			}
		case core.MentionBroadcast:
		default:
			continue
		}
		m := core.Mention{Kind: t.kind, ID: t.id}
		if !seen[m] {
			seen[m] = true
			mentions = append(mentions, m)
		}
	}
	return mentions, mentionsBot
}

// stripBotMention removes the bot's own token (and the separator after it)
// from the start of text, as the text a person addressed to the bot.
func stripBotMention(text, botID string) string {
	t := strings.TrimLeft(text, " \t\r\n")
	tok := "<@" + botID + ">"
	if !strings.HasPrefix(t, tok) {
		return text
	}
	return strings.TrimLeft(t[len(tok):], " \t\r\n,:")
}
