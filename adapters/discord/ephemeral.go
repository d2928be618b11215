package discord

import (
	"context"
	"errors"
	"fmt"

	"github.com/bwmarrin/discordgo"

	"github.com/marlowe-bot/marlowe/core"
)

var _ core.Ephemeral = (*Adapter)(nil)

// interactionWindow is how long an interaction token accepts follow-ups
// (Discord: 15 minutes), less a margin.
const interactionWindow = 14 * 60 // seconds

// clickKey names the latest interaction of a person in a channel or thread.
func clickKey(s core.Scope, user string) string {
	return s.Workspace + "/" + s.Channel + "/" + s.Thread + "/" + user
}

// PostEphemeral implements core.Ephemeral. Discord shows a message to one
// person only as an interaction reply, so the text goes as an ephemeral
// follow-up (flags 64) to that person's latest click in the scope; with no
// click of theirs in the last 14 minutes there is nothing to attach it to.
func (a *Adapter) PostEphemeral(ctx context.Context, scope core.Scope, userID, text string) error {
	if userID == "" || text == "" {
		return errors.New("discord: ephemeral needs a user and a text")
	}
	i, ok := a.clicksBy.get(clickKey(scope, userID))
	if !ok {
		return fmt.Errorf("discord: no recent click by %s in %s to answer ephemerally", userID, scope.Key())
	}
	_, err := a.sess.FollowupMessageCreate(&i, false, &discordgo.WebhookParams{
		Content: truncateRunes(text, maxContent), Flags: discordgo.MessageFlagsEphemeral,
		AllowedMentions: &discordgo.MessageAllowedMentions{},
	}, discordgo.WithContext(ctx))
	if err != nil {
		return fmt.Errorf("discord: ephemeral follow-up: %w", err)
	}
	return nil
}
