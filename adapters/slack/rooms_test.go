package slack

import (
	"testing"

	"github.com/marlowe-bot/marlowe/adapters/slack/slackfake"
)

// The rooms check (post_to_channel, dm_person) learns from Slack which
// workspace hosts a channel (a Slack Connect channel can be another
// organisation's) and whether a person is of this workspace.
func TestRoomsTellWorkspaces(t *testing.T) {
	const shared, member, gone = "C0SHARED01", "U0MEMBE001", "U0GONE0001"
	f := newFake(t, func(c *slackfake.Config) {
		c.ChannelTeams = map[string]string{shared: "T0OTHER001"}
		c.Users = []slackfake.User{{ID: member, Name: "mo"}, {ID: gone, Name: "gone", Deleted: true}}
	})
	a, _ := newAdapter(t, testConfig(f, ModeSocket))
	ctx := t.Context()
	team := f.Config().TeamID
	if ws, err := a.ChannelWorkspace(ctx, chPublic); err != nil || ws != team {
		t.Errorf("ChannelWorkspace(own channel) = %q, %v; want %s", ws, err, team)
	}
	if ws, err := a.ChannelWorkspace(ctx, shared); err != nil || ws != "T0OTHER001" {
		t.Errorf("ChannelWorkspace(shared channel) = %q, %v; want T0OTHER001", ws, err)
	}
	for _, tc := range []struct {
		team, user string
		want       bool
	}{{team, member, true}, {"T0OTHER001", member, false}, {team, gone, false}, {team, "U0NOBODY01", false}} {
		if got, err := a.UserInWorkspace(ctx, tc.team, tc.user); err != nil || got != tc.want {
			t.Errorf("UserInWorkspace(%s, %s) = %v, %v; want %v", tc.team, tc.user, got, err, tc.want)
		}
	}
}
