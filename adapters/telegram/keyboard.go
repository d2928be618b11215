package telegram

import (
	"fmt"
	"strings"

	"github.com/marlowe-bot/marlowe/core"
)

// Inline keyboard limits.
const (
	maxCallbackData = 64 // bytes
	maxButtonsRow   = 4  // more fit, but labels get cut on phones
	maxButtons      = 100
	maxButtonText   = 64
)

// renderCard renders a card as one message: lead (if any), the title, the
// body and the fields as text, and either an inline keyboard (one button
// per action, callback_data = the action's signed token, which is all the
// click brings back) or, once resolved, the resolution line and no
// keyboard. The text is cut to fit one message.
func renderCard(c *core.Card, lead string) (string, *inlineKeyboard, error) {
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
	if lead != "" && c.Title != "" {
		b.WriteString("\n")
	}
	line(c.Title)
	line(c.Body)
	for _, f := range c.Fields {
		line(strings.TrimSpace(f.Label) + ": " + strings.TrimSpace(f.Value))
	}
	res := strings.TrimSpace(c.Resolution)
	if res != "" {
		b.WriteString("\n")
		line(res)
	}
	text := b.String()
	if strings.TrimSpace(text) == "" {
		text = "(card)"
	}
	text = truncateRunes(text, MaxMessageChars)
	if res != "" || len(c.Actions) == 0 {
		return text, nil, nil
	}
	if len(c.Actions) > maxButtons {
		return "", nil, fmt.Errorf("telegram: card has %d actions, Telegram allows %d buttons", len(c.Actions), maxButtons)
	}
	kb := &inlineKeyboard{}
	seen := map[string]bool{}
	var row []inlineButton
	for _, act := range c.Actions {
		switch {
		case act.Token == "":
			return "", nil, fmt.Errorf("telegram: card action %q has no token", act.ID)
		case len(act.Token) > maxCallbackData:
			return "", nil, fmt.Errorf("telegram: action %q token is %d bytes, callback_data allows %d", act.ID, len(act.Token), maxCallbackData)
		case seen[act.Token]:
			return "", nil, fmt.Errorf("telegram: duplicate action token on one card (%q)", act.ID)
		}
		seen[act.Token] = true
		label := strings.TrimSpace(act.Label)
		if label == "" {
			label = act.ID
		}
		row = append(row, inlineButton{Text: truncateRunes(label, maxButtonText), CallbackData: act.Token})
		if len(row) == maxButtonsRow {
			kb.InlineKeyboard = append(kb.InlineKeyboard, row)
			row = nil
		}
	}
	if len(row) > 0 {
		kb.InlineKeyboard = append(kb.InlineKeyboard, row)
	}
	return text, kb, nil
}
