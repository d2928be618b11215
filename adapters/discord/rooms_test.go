package discord

import (
	"testing"

	"github.com/marlowe-bot/marlowe/adapters/discord/discordfake"
)

// Channel ids are global on Discord: the rooms check (post_to_channel,
// dm_person) learns a channel's guild and a person's membership from the
// platform, so a request made in one guild cannot reach another's.
func TestRoomsTellGuilds(t *testing.T) {
	other := discordfake.Guild{ID: "100000000000000099", OwnerID: carol.ID,
		Channels: []discordfake.Channel{{ID: "300000000000000099", Type: discordfake.TypeText, Name: "elsewhere"}},
		Members:  []discordfake.Member{{UserID: carol.ID}}}
	f := newFake(t, discordfake.Config{Guilds: []discordfake.Guild{testGuild(), other}})
	a := startAdapter(t, f, newRecorder().deliver)
	ctx := t.Context()
	for ch, want := range map[string]string{general: guildID, oldThread: guildID, "300000000000000099": other.ID} {
		if got, err := a.ChannelWorkspace(ctx, ch); err != nil || got != want {
			t.Errorf("ChannelWorkspace(%s) = %q, %v; want %q", ch, got, err, want)
		}
	}
	if _, err := a.ChannelWorkspace(ctx, "399999999999999999"); err == nil {
		t.Error("an unknown channel has a guild")
	}
	for _, tc := range []struct {
		guild, user string
		want        bool
	}{{guildID, alice.ID, true}, {guildID, "200000000000000077", false}, {other.ID, alice.ID, false}, {other.ID, carol.ID, true}} {
		if got, err := a.UserInWorkspace(ctx, tc.guild, tc.user); err != nil || got != tc.want {
			t.Errorf("UserInWorkspace(%s, %s) = %v, %v; want %v", tc.guild, tc.user, got, err, tc.want)
		}
	}
	if _, err := a.UserInWorkspace(ctx, "", alice.ID); err == nil {
		t.Error("membership in no guild was answered")
	}
}
