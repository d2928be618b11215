package slack

import (
	"context"
	"fmt"
	"slices"

	"github.com/slack-go/slack"

	"github.com/marlowe-bot/marlowe/core"
)

var _ core.Rooms = (*Adapter)(nil)

// ChannelWorkspace implements core.Rooms with conversations.info: the
// workspace hosting the channel (context_team_id; a Slack Connect channel
// shared from another organisation names that one), or the bot's own when
// Slack does not say.
func (a *Adapter) ChannelWorkspace(ctx context.Context, channel string) (string, error) {
	c, err := a.conversationInfo(ctx, channel)
	if err != nil {
		return "", fmt.Errorf("slack: conversations.info %s: %w", channel, err)
	}
	if c.ContextTeamID != "" {
		return c.ContextTeamID, nil
	}
	return a.TeamID(), nil
}

// UserInWorkspace implements core.Rooms with users.info: a person of
// workspace team who has not been deactivated.
func (a *Adapter) UserInWorkspace(ctx context.Context, team, user string) (bool, error) {
	u, err := a.userInfo(ctx, user)
	if err != nil {
		if err.Error() == "user_not_found" {
			return false, nil
		}
		return false, fmt.Errorf("slack: users.info %s: %w", user, err)
	}
	return u.TeamID == team && !u.Deleted, nil
}

var _ core.RoomReader = (*Adapter)(nil)

// CanRead implements core.RoomReader, asked of Slack each time (nothing is
// cached, so no membership event can leave a stale answer): a DM is
// readable by its own person only; a public channel by every full member
// (not a guest) of the workspace hosting it, and by its members; any other
// conversation (private channel, group DM, a Slack Connect channel) by its
// members (conversations.members). A conversation the bot cannot see
// (channel_not_found) is readable by nobody.
func (a *Adapter) CanRead(ctx context.Context, channel, user string) (bool, error) {
	c, err := a.conversationInfo(ctx, channel)
	if err != nil {
		if err.Error() == "channel_not_found" {
			return false, nil
		}
		return false, fmt.Errorf("slack: conversations.info %s: %w", channel, err)
	}
	if c.IsIM {
		return c.User != "" && c.User == user, nil
	}
	if c.IsChannel && !c.IsPrivate && !c.IsMpIM && !c.IsExtShared {
		u, err := a.userInfo(ctx, user)
		if err != nil && err.Error() != "user_not_found" {
			return false, fmt.Errorf("slack: users.info %s: %w", user, err)
		}
		team := c.ContextTeamID
		if team == "" {
			team = a.TeamID()
		}
		if err == nil && u.TeamID == team && !u.Deleted && !u.IsRestricted && !u.IsUltraRestricted {
			return true, nil
		}
	}
	params := &slack.GetUsersInConversationParameters{ChannelID: channel, Limit: 1000}
	for {
		var (
			members []string
			next    string
		)
		err := a.pacer.lookup(ctx, "conversations.members", func(ctx context.Context) error {
			var err error
			members, next, err = a.api.GetUsersInConversationContext(ctx, params)
			return err
		})
		if err != nil {
			return false, fmt.Errorf("slack: conversations.members %s: %w", channel, err)
		}
		if slices.Contains(members, user) {
			return true, nil
		}
		if next == "" {
			return false, nil
		}
		params.Cursor = next
	}
}

// conversationInfo reads conversations.info in its paced queue (Tier 3):
// a 429's Retry-After is waited out.
func (a *Adapter) conversationInfo(ctx context.Context, channel string) (*slack.Channel, error) {
	var c *slack.Channel
	err := a.pacer.lookup(ctx, "conversations.info", func(ctx context.Context) error {
		var err error
		c, err = a.api.GetConversationInfoContext(ctx, &slack.GetConversationInfoInput{ChannelID: channel})
		return err
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}

// userInfo reads users.info in its paced queue (Tier 4): a 429's
// Retry-After is waited out.
func (a *Adapter) userInfo(ctx context.Context, user string) (*slack.User, error) {
	var u *slack.User
	err := a.pacer.lookup(ctx, "users.info", func(ctx context.Context) error {
		var err error
		u, err = a.api.GetUserInfoContext(ctx, user)
		return err
	})
	if err != nil {
		return nil, err
	}
	return u, nil
}
