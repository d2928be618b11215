package discord

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/marlowe-bot/marlowe/core"
)

var _ core.Ephemeral = (*Adapter)(nil)

// interactionWindow is how long an interaction token accepts follow-ups
// (Discord: 15 minutes), less a margin.
const interactionWindow = 14 * 60 // seconds

// clickRef is a person's latest interaction in a scope; acked is closed
// once its initial response was sent (Discord refuses a follow-up before
// it: "Interaction has not been acknowledged").
type clickRef struct {
	i     discordgo.Interaction
	acked chan struct{}
}

// ackWait bounds how long a follow-up waits for its interaction's initial
// response (sent within Discord's 3 s).
const ackWait = 5 * time.Second

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
	c, ok := a.clicksBy.get(clickKey(scope, userID))
	if !ok {
		return fmt.Errorf("discord: no recent click by %s in %s to answer ephemerally", userID, scope.Key())
	}
	// The engine may answer a click before the adapter has acknowledged
	// it (the answer to a button it has no record of comes at once).
	t := time.NewTimer(ackWait)
	defer t.Stop()
	select {
	case <-c.acked:
	case <-t.C:
	case <-ctx.Done():
		return fmt.Errorf("discord: ephemeral follow-up: %w", ctx.Err())
	}
	_, err := a.sess.FollowupMessageCreate(&c.i, false, &discordgo.WebhookParams{
		Content: truncateRunes(text, maxContent), Flags: discordgo.MessageFlagsEphemeral,
		AllowedMentions: &discordgo.MessageAllowedMentions{},
	}, discordgo.WithContext(ctx))
	if err != nil {
		return fmt.Errorf("discord: ephemeral follow-up: %w", err)
	}
	return nil
}
