package slack

import (
	"regexp"
	"strings"

	"github.com/marlowe-bot/marlowe/core"
)

// Every text the adapter sends to Slack is defanged here, at the entry of
// the port method that sends it: Post, Update, PostEphemeral (defangOutbound,
// defang), StartStream, AppendStream, StopStream (defangUpdate),
// UploadFile (defangFile), PublishHome (its blocks). Whatever a method
// does afterwards (split, chunk, render blocks, settle a stream's text)
// works on text that can no longer page anyone.

// broadcastToken matches Slack's broadcast and user-group mention tokens.
var broadcastToken = regexp.MustCompile(`<!(here|channel|everyone|subteam\^[A-Za-z0-9]+)(\|[^>]*)?>`)

// plainBroadcast matches a bare "@here", "@channel" or "@everyone": Slack
// parses them itself where text is not verbatim (mrkdwn text objects,
// link_names). A letter or digit before the "@" makes it an address
// (ops@here.com); anything else, mrkdwn's "_" italics included, does not.
var plainBroadcast = regexp.MustCompile(`(^|[^\p{L}\p{N}@])@(here|channel|everyone)(\b|_)`)

// defang neutralises broadcast and user-group mentions in outbound text, so
// no model output or quoted message can page a whole channel: the tokens
// (<!here>, <!subteam^…>) and the bare words. It keeps the word readable
// ("@here") with a word joiner that stops linking.
func defang(s string) string {
	if strings.Contains(s, "@") {
		s = plainBroadcast.ReplaceAllString(s, "${1}@\u2060${2}${3}")
	}
	if !strings.Contains(s, "<!") {
		return s
	}
	return broadcastToken.ReplaceAllStringFunc(s, func(tok string) string {
		m := broadcastToken.FindStringSubmatch(tok)
		name := m[1]
		if label := strings.TrimPrefix(m[2], "|"); label != "" {
			name = strings.TrimPrefix(label, "@")
		} else if strings.HasPrefix(name, "subteam^") {
			name = "group"
		}
		return "@\u2060" + name
	})
}

// defangOutbound defangs a post or edit: its text and every text of its card.
func defangOutbound(out core.Outbound) core.Outbound {
	out.Text = defang(out.Text)
	if out.Card != nil {
		c := *out.Card
		c.Title, c.Body, c.Resolution = defang(c.Title), defang(c.Body), defang(c.Resolution)
		c.Fields = append([]core.CardField(nil), c.Fields...)
		for i := range c.Fields {
			c.Fields[i].Label, c.Fields[i].Value = defang(c.Fields[i].Label), defang(c.Fields[i].Value)
		}
		c.Actions = append([]core.CardAction(nil), c.Actions...)
		for i := range c.Actions {
			c.Actions[i].Label = defang(c.Actions[i].Label)
		}
		out.Card = &c
	}
	return out
}

// defangUpdate defangs a stream update: the answer, the plan's title and
// every task's title and output. The stream's bookkeeping (what was sent,
// what a resumed process reads back) is then all in defanged text.
func defangUpdate(u core.StreamUpdate) core.StreamUpdate {
	u.Text, u.Title = defang(u.Text), defang(u.Title)
	u.Tasks = append([]core.StreamTask(nil), u.Tasks...)
	for i := range u.Tasks {
		u.Tasks[i].Title, u.Tasks[i].Output = defang(u.Tasks[i].Title), defang(u.Tasks[i].Output)
	}
	return u
}

// defangFile defangs what Slack shows of a file beside its bytes.
func defangFile(f core.File) core.File {
	f.Title, f.Name = defang(f.Title), defang(f.Name)
	return f
}

// maxOpenToken bounds how much of a streaming answer a possible token
// holds back: Slack's broadcast and group tokens are short.
const maxOpenToken = 256

// withoutOpenToken is the part of a streaming answer that may be sent
// now: up to a "<" or "<!…" not yet closed at its end. The answer grows
// between appends, so "<!chan" sent now and "nel>" next would join, in
// the message, into the token no single append carried; held back, the
// token is whole (and defanged) by the next append. The stop sends
// everything.
func withoutOpenToken(s string) string {
	i := strings.LastIndexByte(s, '<')
	if i < 0 || len(s)-i > maxOpenToken {
		return s
	}
	if tail := s[i:]; (tail == "<" || strings.HasPrefix(tail, "<!")) && !strings.Contains(tail, ">") {
		return s[:i]
	}
	return s
}
