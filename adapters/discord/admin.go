package discord

import (
	"context"
	"errors"
	"fmt"

	"github.com/bwmarrin/discordgo"

	"github.com/marlowe-bot/marlowe/core"
)

// guildInfo is what governance needs of a guild.
type guildInfo struct {
	owner string
	roles map[string]int64 // role id → permissions
}

// IsAdmin implements core.Administrators: the guild's owner, or a member
// whose roles (with @everyone's) grant Administrator or Manage Server, is
// an admin of every channel in the guild. A DM has no admins. Guild and
// member reads are cached for a minute.
func (a *Adapter) IsAdmin(ctx context.Context, scope core.Scope, userID string) (bool, error) {
	if scope.Platform != "" && scope.Platform != Platform {
		return false, fmt.Errorf("discord: scope platform %q is not %q", scope.Platform, Platform)
	}
	if userID == "" {
		return false, errors.New("discord: is-admin: no user id")
	}
	guild := scope.Workspace
	if guild == "" {
		return false, nil
	}
	g, err := a.guild(ctx, guild)
	if err != nil {
		return false, err
	}
	if g.owner == userID {
		return true, nil
	}
	roles, err := a.memberRoles(ctx, guild, userID)
	if err != nil {
		return false, err
	}
	perms := g.roles[guild] // @everyone's role id is the guild id
	for _, r := range roles {
		perms |= g.roles[r]
	}
	return perms&(permAdministrator|permManageGuild) != 0, nil
}

func (a *Adapter) guild(ctx context.Context, id string) (guildInfo, error) {
	if g, ok := a.guilds.get(id); ok {
		return g, nil
	}
	return a.fetchGuild(ctx, id)
}

func (a *Adapter) memberRoles(ctx context.Context, guild, user string) ([]string, error) {
	key := guild + "/" + user
	if r, ok := a.members.get(key); ok {
		return r, nil
	}
	m, err := a.sess.GuildMember(guild, user, discordgo.WithContext(ctx))
	if err != nil {
		if isCode(err, discordgo.ErrCodeUnknownMember) {
			return nil, nil // not a member: no roles
		}
		return nil, fmt.Errorf("discord: member %s of %s: %w", user, guild, err)
	}
	a.members.put(key, m.Roles)
	return m.Roles, nil
}
