package discord

import (
	"bytes"
	"context"
	"fmt"

	"github.com/bwmarrin/discordgo"

	"github.com/marlowe-bot/marlowe/core"
)

var _ core.FileUploader = (*Adapter)(nil)

// UploadFile implements core.FileUploader: one message carrying the file
// (multipart POST /channels/{id}/messages), in the scope's conversation
// (its thread when it has one), mentioning nobody, paced as a message.
func (a *Adapter) UploadFile(ctx context.Context, scope core.Scope, f core.File) error {
	if err := checkScope(scope); err != nil {
		return err
	}
	scope.Platform = Platform
	target, err := a.target(ctx, scope, core.PriorityHigh)
	if err != nil {
		return err
	}
	// A file is a message: it waits its turn in the channel's queue of
	// message creates (the same route and bucket as an answer), high
	// priority as a card is, and a 429's retry_after is waited out there
	// before it is sent again. Each attempt reads the file afresh.
	err = a.pacer.send(ctx, routeCreate, target, core.PriorityHigh, "", func(ctx context.Context) error {
		msg := &discordgo.MessageSend{
			Content:         f.Title,
			Files:           []*discordgo.File{{Name: f.Name, ContentType: f.Type, Reader: bytes.NewReader(f.Content)}},
			AllowedMentions: &discordgo.MessageAllowedMentions{},
		}
		_, err := a.sess.ChannelMessageSendComplex(target, msg, discordgo.WithContext(ctx))
		return err
	})
	if err != nil {
		return fmt.Errorf("discord upload %s to %s: %w", f.Name, target, err)
	}
	return nil
}
