package slack

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/slack-go/slack"

	"github.com/marlowe-bot/marlowe/core"
)

// Block Kit limits (https://docs.slack.dev/reference/block-kit).
const (
	maxHeaderText   = 150
	maxSectionText  = 3000
	maxFieldText    = 2000
	maxFields       = 10
	maxButtonText   = 75
	maxActionID     = 255
	maxBlockID      = 255
	maxButtonValue  = 2000
	maxButtons      = 25
	maxBlocks       = 50
	maxFallbackText = 300
)

// renderCard renders a card as Block Kit: a header with the title, a section
// with the body, sections of fields, and either an actions block (one button
// per action: action_id = the action id, value = its signed token, block_id =
// the card id) or, once resolved, a context line with the resolution and no
// buttons. lead, when set, is shown above the card.
func renderCard(c *core.Card, lead string) ([]slack.Block, string, error) {
	if c == nil {
		return nil, "", nil
	}
	if utf8.RuneCountInString(c.ID) > maxBlockID {
		return nil, "", fmt.Errorf("slack: card id is %d chars, Slack allows %d", utf8.RuneCountInString(c.ID), maxBlockID)
	}
	var blocks []slack.Block
	for _, chunk := range chunkRunes(defang(lead), maxSectionText) {
		blocks = append(blocks, slack.NewSectionBlock(slack.NewTextBlockObject(slack.MarkdownType, chunk, false, false), nil, nil))
	}
	title := strings.TrimSpace(c.Title)
	if title != "" {
		blocks = append(blocks, slack.NewHeaderBlock(slack.NewTextBlockObject(slack.PlainTextType, truncateRunes(defang(title), maxHeaderText), false, false)))
	}
	for _, chunk := range chunkRunes(defang(c.Body), maxSectionText) {
		blocks = append(blocks, slack.NewSectionBlock(slack.NewTextBlockObject(slack.MarkdownType, chunk, false, false), nil, nil))
	}
	var fields []*slack.TextBlockObject
	for _, f := range c.Fields {
		txt := truncateRunes(fmt.Sprintf("*%s*\n%s", defang(f.Label), defang(f.Value)), maxFieldText)
		fields = append(fields, slack.NewTextBlockObject(slack.MarkdownType, txt, false, false))
		if len(fields) == maxFields {
			blocks = append(blocks, slack.NewSectionBlock(nil, fields, nil))
			fields = nil
		}
	}
	if len(fields) > 0 {
		blocks = append(blocks, slack.NewSectionBlock(nil, fields, nil))
	}
	if res := strings.TrimSpace(c.Resolution); res != "" {
		blocks = append(blocks, slack.NewContextBlock("", slack.NewTextBlockObject(slack.MarkdownType, truncateRunes(defang(res), maxSectionText), false, false)))
	} else if len(c.Actions) > 0 {
		if len(c.Actions) > maxButtons {
			return nil, "", fmt.Errorf("slack: card has %d actions, Slack allows %d buttons", len(c.Actions), maxButtons)
		}
		seen := map[string]bool{}
		var elems []slack.BlockElement
		for _, act := range c.Actions {
			switch {
			case act.ID == "":
				return nil, "", fmt.Errorf("slack: card action %q has no id", act.Label)
			case utf8.RuneCountInString(act.ID) > maxActionID:
				return nil, "", fmt.Errorf("slack: action id is %d chars, Slack allows %d", utf8.RuneCountInString(act.ID), maxActionID)
			case utf8.RuneCountInString(act.Token) > maxButtonValue:
				return nil, "", fmt.Errorf("slack: action token is %d chars, Slack allows %d in a button value", utf8.RuneCountInString(act.Token), maxButtonValue)
			case seen[act.ID]:
				return nil, "", fmt.Errorf("slack: duplicate action id %q on one card", act.ID)
			}
			seen[act.ID] = true
			label := strings.TrimSpace(act.Label)
			if label == "" {
				label = act.ID
			}
			btn := slack.NewButtonBlockElement(act.ID, act.Token,
				slack.NewTextBlockObject(slack.PlainTextType, truncateRunes(label, maxButtonText), false, false))
			switch act.Style {
			case "primary":
				btn.Style = slack.StylePrimary
			case "danger":
				btn.Style = slack.StyleDanger
			}
			elems = append(elems, btn)
		}
		blocks = append(blocks, slack.NewActionBlock(c.ID, elems...))
	}
	if len(blocks) > maxBlocks {
		return nil, "", fmt.Errorf("slack: card renders to %d blocks, Slack allows %d", len(blocks), maxBlocks)
	}
	fallback := title
	if fallback == "" {
		fallback = strings.TrimSpace(c.Body)
	}
	if lead != "" {
		fallback = lead
	}
	return blocks, truncateRunes(defang(fallback), maxFallbackText), nil
}

// chunkRunes cuts s into pieces of at most n runes, preferring line breaks
// ("" gives none).
func chunkRunes(s string, n int) []string {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil
	}
	return cutRunes(s, n, "\n")
}
