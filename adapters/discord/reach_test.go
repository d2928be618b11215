package discord

import (
	"context"
	"errors"
	"testing"

	"github.com/marlowe-bot/marlowe/adapters/discord/discordfake"
	"github.com/marlowe-bot/marlowe/core"
)

// ATTACK (rooms the requester cannot reach), on Discord: the one
// reachability rule (core.CheckReach) asked of the real adapter against
// the fake. A DM's workspace is empty, and so is every DM's, so "same
// workspace" let Alice post from her DM into Bob's; and "same guild" let
// Bob post into a private channel he cannot see. Now the member's roles
// and the channel's overwrites (@everyone, roles, the member) decide
// VIEW_CHANNEL, read afresh each time. A private thread was refused to
// everyone, its own members included; now its members who can see the
// parent, and moderators, reach it.
func TestDiscordReachability(t *testing.T) {
	const (
		devOnly = "300000000000000015" // private, a role overwrite lets roleDev in
		noBob   = "300000000000000016" // public, a member overwrite shuts Bob out
		aliceDM = "400000000000000001"
		devThr  = "300000000000000017" // a public thread in dev-only
		bobThr  = "300000000000000018" // a private thread in general, Bob and Dave in it
		devPriv = "300000000000000019" // a private thread in dev-only, Dave in it
		roleThr = "300000000000000023" // MANAGE_THREADS
	)
	dave := discordfake.User{ID: "200000000000000005", Username: "dave"} // a member with no roles
	erin := discordfake.User{ID: "200000000000000006", Username: "erin"} // a thread moderator
	g := testGuild()
	g.Channels = append(g.Channels,
		discordfake.Channel{ID: devOnly, Type: discordfake.TypeText, Name: "dev-only", Private: true,
			Overwrites: []discordfake.Overwrite{{ID: roleDev, Allow: discordfake.PermViewChannel}}},
		discordfake.Channel{ID: noBob, Type: discordfake.TypeText, Name: "no-bob",
			Overwrites: []discordfake.Overwrite{{ID: bob.ID, Member: true, Deny: discordfake.PermViewChannel}}},
		discordfake.Channel{ID: devThr, Type: discordfake.TypePublicThread, Name: "dev-thread", Parent: devOnly},
		discordfake.Channel{ID: bobThr, Type: discordfake.TypePrivateThread, Name: "bob-thread", Parent: general, Members: []string{bob.ID, dave.ID}},
		discordfake.Channel{ID: devPriv, Type: discordfake.TypePrivateThread, Name: "dev-private", Parent: devOnly, Members: []string{dave.ID}})
	g.Roles = append(g.Roles, discordfake.Role{ID: roleThr, Permissions: discordfake.PermViewChannel | discordfake.PermManageThreads})
	g.Members = append(g.Members, discordfake.Member{UserID: dave.ID}, discordfake.Member{UserID: erin.ID, Roles: []string{roleThr}})
	f := newFake(t, discordfake.Config{Guilds: []discordfake.Guild{g}})
	a := startAdapter(t, f, newRecorder().deliver)
	ctx := context.Background()
	f.Say(discordfake.Msg{Channel: aliceDM, Author: alice, Content: "hi"})
	bobDM, err := a.OpenDM(ctx, bob.ID)
	if err != nil {
		t.Fatal(err)
	}
	inAliceDM := core.Scope{Platform: Platform, Channel: aliceDM}
	inGeneral := scopeOf(general, "")
	for _, tc := range []struct {
		name      string
		from      core.Scope
		requester string
		target    string
		ok        bool
	}{
		{"DM to another person's DM", inAliceDM, alice.ID, bobDM.Channel, false},
		{"guild channel to a person's DM", inGeneral, bob.ID, aliceDM, false},
		{"DM to a guild channel", inAliceDM, alice.ID, general, false},
		{"private channel, @everyone denied", inGeneral, bob.ID, secret, false},
		{"private channel, an administrator", inGeneral, alice.ID, secret, true},
		{"private channel, a role overwrite allows", inGeneral, bob.ID, devOnly, true},
		{"private channel, no such role", inGeneral, dave.ID, devOnly, false},
		{"public channel, a member overwrite denies", inGeneral, bob.ID, noBob, false},
		{"public channel, everyone else", inGeneral, dave.ID, noBob, true},
		{"public channel, not a member of the guild", inGeneral, "200000000000000077", ops, false},
		{"a thread of a public channel", inGeneral, dave.ID, oldThread, true},
		// A private thread: its members who can see the parent, and
		// moderators (MANAGE_THREADS); nobody else, however public the
		// parent.
		{"a private thread, not a member", inGeneral, dave.ID, privThr, false},
		{"a private thread, a member", inGeneral, bob.ID, bobThr, true},
		{"a private thread, another member", inGeneral, dave.ID, bobThr, true},
		{"a private thread, MANAGE_THREADS on the parent", inGeneral, erin.ID, privThr, true},
		{"a private thread, an administrator", inGeneral, alice.ID, privThr, true},
		{"a private thread of a private channel, a member who cannot see the channel", inGeneral, dave.ID, devPriv, false},
		{"a private thread, not in the guild", inGeneral, "200000000000000077", bobThr, false},
		// A public thread is as private as its channel.
		{"a public thread of a private channel, no such role", inGeneral, dave.ID, devThr, false},
		{"a public thread of a private channel, a role overwrite allows", inGeneral, bob.ID, devThr, true},
		{"the room the request came from", inAliceDM, alice.ID, aliceDM, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := core.CheckReach(ctx, a, tc.from, tc.requester, tc.target)
			if tc.ok && err != nil {
				t.Fatalf("refused: %v", err)
			}
			if !tc.ok && !errors.Is(err, core.ErrUnreachable) {
				t.Fatalf("not refused (%v)", err)
			}
		})
	}
	// The DM rule holds in CanRead itself, not only through workspaces.
	if ok, err := a.CanRead(ctx, bobDM.Channel, alice.ID); ok || err != nil {
		t.Fatalf("CanRead(Bob's DM, Alice) = %v, %v", ok, err)
	}
}
