package slack

import (
	"context"
	"fmt"

	"github.com/slack-go/slack"

	"github.com/marlowe-bot/marlowe/core"
)

var _ core.Rooms = (*Adapter)(nil)

// ChannelWorkspace implements core.Rooms with conversations.info: the
// workspace hosting the channel (context_team_id; a Slack Connect channel
// shared from another organisation names that one), or the bot's own when
// Slack does not say.
func (a *Adapter) ChannelWorkspace(ctx context.Context, channel string) (string, error) {
	c, err := a.api.GetConversationInfoContext(ctx, &slack.GetConversationInfoInput{ChannelID: channel})
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
	u, err := a.api.GetUserInfoContext(ctx, user)
	if err != nil {
		if err.Error() == "user_not_found" {
			return false, nil
		}
		return false, fmt.Errorf("slack: users.info %s: %w", user, err)
	}
	return u.TeamID == team && !u.Deleted, nil
}
