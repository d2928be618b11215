package discord

import (
	"context"
	"fmt"
	"slices"

	"github.com/bwmarrin/discordgo"

	"github.com/marlowe-bot/marlowe/core"
)

var _ core.RoomReader = (*Adapter)(nil)

// CanRead implements core.RoomReader from Discord itself, read afresh each
// time (the channel with its permission overwrites, the guild's roles,
// the member's roles), so no cached answer outlives a role change, an
// overwrite edit or a member leaving. A DM is readable by its recipients
// only. In a guild, the member needs VIEW_CHANNEL as Discord computes it:
// the owner and Administrator see everything; otherwise @everyone's and
// the member's roles' permissions, then the channel's @everyone
// overwrite, its role overwrites together, its member overwrite. A public
// thread is read through its parent. A private thread, as Discord shows
// it, is seen by those who can view its parent and are either its members
// or hold MANAGE_THREADS there. A channel the bot cannot read is readable
// by nobody, as far as the bot can tell.
func (a *Adapter) CanRead(ctx context.Context, channel, user string) (bool, error) {
	c, err := a.sess.Channel(channel, discordgo.WithContext(ctx))
	if isCode(err, discordgo.ErrCodeUnknownChannel) || isCode(err, discordgo.ErrCodeMissingAccess) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("discord: channel %s: %w", channel, err)
	}
	switch c.Type {
	case discordgo.ChannelTypeDM, discordgo.ChannelTypeGroupDM:
		return slices.ContainsFunc(c.Recipients, func(u *discordgo.User) bool { return u != nil && u.ID == user }), nil
	case discordgo.ChannelTypeGuildPrivateThread:
		return a.canReadPrivateThread(ctx, c, user)
	}
	if isThread(c.Type) {
		if c.ParentID == "" {
			return false, nil
		}
		return a.CanRead(ctx, c.ParentID, user)
	}
	perms, err := a.memberPerms(ctx, c, user)
	return perms&permViewChannel != 0, err
}

// canReadPrivateThread: VIEW_CHANNEL on the parent, then membership of the
// thread, or MANAGE_THREADS on the parent (moderators see every private
// thread). Membership is asked of Discord each time, like the rest.
func (a *Adapter) canReadPrivateThread(ctx context.Context, th *discordgo.Channel, user string) (bool, error) {
	if th.ParentID == "" {
		return false, nil
	}
	parent, err := a.sess.Channel(th.ParentID, discordgo.WithContext(ctx))
	if isCode(err, discordgo.ErrCodeUnknownChannel) || isCode(err, discordgo.ErrCodeMissingAccess) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("discord: channel %s: %w", th.ParentID, err)
	}
	perms, err := a.memberPerms(ctx, parent, user)
	if err != nil || perms&permViewChannel == 0 {
		return false, err
	}
	if perms&permManageThreads != 0 {
		return true, nil
	}
	_, err = a.sess.ThreadMember(th.ID, user, false, discordgo.WithContext(ctx))
	if isCode(err, discordgo.ErrCodeUnknownMember) || isCode(err, discordgo.ErrCodeUnknownUser) ||
		isCode(err, discordgo.ErrCodeUnknownChannel) || isCode(err, discordgo.ErrCodeMissingAccess) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("discord: member %s of thread %s: %w", user, th.ID, err)
	}
	return true, nil
}

// memberPerms is a member's permissions in a guild channel, read afresh:
// 0 when they are not in the guild or the channel is not a guild's.
func (a *Adapter) memberPerms(ctx context.Context, c *discordgo.Channel, user string) (int64, error) {
	if c.GuildID == "" {
		return 0, nil
	}
	g, err := a.fetchGuild(ctx, c.GuildID)
	if err != nil {
		return 0, err
	}
	if g.owner == user {
		return -1, nil // every bit
	}
	m, err := a.sess.GuildMember(c.GuildID, user, discordgo.WithContext(ctx))
	if isCode(err, discordgo.ErrCodeUnknownMember) || isCode(err, discordgo.ErrCodeUnknownUser) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("discord: member %s of %s: %w", user, c.GuildID, err)
	}
	return channelPerms(c, g, user, m.Roles), nil
}

// channelPerms computes a member's permissions in a guild channel, in
// Discord's documented order.
func channelPerms(c *discordgo.Channel, g guildInfo, user string, roles []string) int64 {
	perms := g.roles[c.GuildID] // @everyone's role id is the guild id
	for _, r := range roles {
		perms |= g.roles[r]
	}
	if perms&permAdministrator != 0 {
		return -1 // every bit
	}
	var allow, deny int64
	for _, o := range c.PermissionOverwrites {
		if o != nil && o.Type == discordgo.PermissionOverwriteTypeRole && o.ID == c.GuildID {
			perms = perms&^o.Deny | o.Allow
		}
	}
	for _, o := range c.PermissionOverwrites {
		if o != nil && o.Type == discordgo.PermissionOverwriteTypeRole && o.ID != c.GuildID && slices.Contains(roles, o.ID) {
			allow |= o.Allow
			deny |= o.Deny
		}
	}
	perms = perms&^deny | allow
	for _, o := range c.PermissionOverwrites {
		if o != nil && o.Type == discordgo.PermissionOverwriteTypeMember && o.ID == user {
			perms = perms&^o.Deny | o.Allow
		}
	}
	return perms
}
