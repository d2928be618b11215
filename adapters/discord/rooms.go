package discord

import (
	"context"
	"errors"
	"fmt"

	"github.com/bwmarrin/discordgo"

	"github.com/marlowe-bot/marlowe/core"
)

var _ core.Rooms = (*Adapter)(nil)

// ChannelWorkspace implements core.Rooms: the guild a channel (or thread)
// belongs to, "" for a DM. Channel ids are global on Discord, so without
// this check the bot could relay into another guild's channel.
func (a *Adapter) ChannelWorkspace(ctx context.Context, channel string) (string, error) {
	c, ok := a.channel(ctx, channel)
	if !ok {
		return "", fmt.Errorf("discord: channel %s is unknown to the bot", channel)
	}
	return c.guild, nil
}

// UserInWorkspace implements core.Rooms: whether user is a member of guild.
func (a *Adapter) UserInWorkspace(ctx context.Context, guild, user string) (bool, error) {
	if guild == "" {
		return false, errors.New("discord: a DM has no guild to check membership in")
	}
	_, err := a.sess.GuildMember(guild, user, discordgo.WithContext(ctx))
	if isCode(err, discordgo.ErrCodeUnknownMember) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("discord: member %s of %s: %w", user, guild, err)
	}
	return true, nil
}
