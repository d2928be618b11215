package discord

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/bwmarrin/discordgo"

	"github.com/marlowe-bot/marlowe/core"
)

// Component limits (https://discord.com/developers/docs/components).
const (
	maxRows       = 5
	maxRowButtons = 5
	maxCustomID   = 100
	maxLabel      = 80
	maxContent    = 2000
)

// renderCard renders a card as one message: Markdown content (lead, bold
// title, body, fields) and action rows of buttons, one per action, whose
// custom_id is the action's signed token — all a click brings back, and
// what the engine verifies. A resolved card has no buttons and shows the
// resolution (who decided what, when) instead.
func renderCard(c *core.Card, lead string) (string, []discordgo.MessageComponent, error) {
	if c == nil {
		return "", nil, nil
	}
	var b strings.Builder
	line := func(s string) {
		if s = strings.TrimSpace(s); s != "" {
			if b.Len() > 0 {
				b.WriteString("\n")
			}
			b.WriteString(s)
		}
	}
	line(lead)
	if t := strings.TrimSpace(c.Title); t != "" {
		line("**" + truncateRunes(strings.ReplaceAll(t, "*", "\\*"), 256) + "**")
	}
	line(c.Body)
	for _, f := range c.Fields {
		line("**" + strings.TrimSpace(f.Label) + ":** " + strings.TrimSpace(f.Value))
	}
	res := strings.TrimSpace(c.Resolution)
	if res != "" {
		line("> " + strings.ReplaceAll(res, "\n", "\n> "))
	}
	content := fitContent(b.String(), res)

	if res != "" || len(c.Actions) == 0 {
		return content, nil, nil
	}
	if len(c.Actions) > maxRows*maxRowButtons {
		return "", nil, fmt.Errorf("discord: card has %d actions, Discord allows %d buttons", len(c.Actions), maxRows*maxRowButtons)
	}
	seen := map[string]bool{}
	var rows []discordgo.MessageComponent
	var row discordgo.ActionsRow
	for _, act := range c.Actions {
		switch {
		case act.Token == "":
			return "", nil, fmt.Errorf("discord: card action %q has no token", act.ID)
		case len(act.Token) > maxCustomID:
			return "", nil, fmt.Errorf("discord: action token is %d bytes, Discord allows %d in a custom_id", len(act.Token), maxCustomID)
		case seen[act.Token]:
			return "", nil, fmt.Errorf("discord: duplicate action token on one card (%q)", act.ID)
		}
		seen[act.Token] = true
		label := strings.TrimSpace(act.Label)
		if label == "" {
			label = act.ID
		}
		style := discordgo.SecondaryButton
		switch act.Style {
		case "primary":
			style = discordgo.SuccessButton
		case "danger":
			style = discordgo.DangerButton
		}
		row.Components = append(row.Components, discordgo.Button{
			Label: truncateRunes(label, maxLabel), Style: style, CustomID: act.Token,
		})
		if len(row.Components) == maxRowButtons {
			rows = append(rows, row)
			row = discordgo.ActionsRow{}
		}
	}
	if len(row.Components) > 0 {
		rows = append(rows, row)
	}
	return content, rows, nil
}

// fitContent shortens card content to Discord's 2,000 characters, keeping
// the resolution line (the part people need to see) at the end.
func fitContent(s, res string) string {
	if utf16Len(s) <= maxContent {
		return s
	}
	tail := ""
	if res != "" {
		tail = "\n> " + truncateRunes(res, 300)
	}
	room := maxContent - utf16Len(tail) - 1
	for n := min(utf8.RuneCountInString(s), room); n > 0; n -= 50 {
		head := truncateRunes(s, n)
		if utf16Len(head)+utf16Len(tail) <= maxContent {
			return head + tail
		}
	}
	return truncateRunes(tail, 300)
}
