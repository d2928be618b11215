package slack

import (
	"context"
	"errors"
	"testing"

	"github.com/marlowe-bot/marlowe/adapters/slack/slackfake"
	"github.com/marlowe-bot/marlowe/core"
)

// ATTACK (rooms the requester cannot reach), on Slack: the one
// reachability rule (core.CheckReach) asked of the real adapter against
// the fake. From her own DM, Alice cannot post into Bob's DM; nor into a
// private channel she is not in, until she joins it (asked afresh: no
// cached answer survives the join, or a leave); a guest cannot reach a
// public channel she is not in. Refusals name no room. On the old code
// only the workspace was compared, and every one of these is in it.
func TestSlackReachability(t *testing.T) {
	const guest = "U0GUEST001"
	const bobDM = "D0BOB00001" // conversations.open's id for bob
	f := newFake(t, func(c *slackfake.Config) {
		c.Users = []slackfake.User{{ID: alice, Name: "alice"}, {ID: bob, Name: "bob"}, {ID: guest, Name: "guest", IsRestricted: true}}
		c.Members = map[string][]string{chDM: {alice}, chPrivate: {bob}, chPublic: {bob}}
	})
	a, _ := newAdapter(t, testConfig(f, ModeSocket))
	ctx := context.Background()
	team := f.Config().TeamID
	inDM := core.Scope{Platform: Platform, Workspace: team, Channel: chDM}
	inPublic := core.Scope{Platform: Platform, Workspace: team, Channel: chPublic}
	for _, tc := range []struct {
		name      string
		from      core.Scope
		requester string
		target    string
		ok        bool
	}{
		{"DM to another person's DM", inDM, alice, bobDM, false},
		{"channel to another person's DM", inPublic, alice, bobDM, false},
		{"channel to her own DM", inPublic, alice, chDM, true},
		{"private channel she is not in", inPublic, alice, chPrivate, false},
		{"private channel its member is in", inPublic, bob, chPrivate, true},
		{"public channel, a full member", inDM, alice, chPublic, true},
		{"public channel, a guest not in it", inDM, guest, chPublic, false},
		{"the room the request came from", inDM, alice, chDM, true},
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
	// A guest reads the public channels they are in.
	f.SetMembers(chPublic, bob, guest)
	if err := core.CheckReach(ctx, a, inDM, guest, chPublic); err != nil {
		t.Fatalf("a guest in the channel: %v", err)
	}
	// Membership changes are seen at once.
	f.SetMembers(chPrivate, bob, alice)
	if err := core.CheckReach(ctx, a, inPublic, alice, chPrivate); err != nil {
		t.Fatalf("after Alice joined: %v", err)
	}
	f.SetMembers(chPrivate, bob)
	if err := core.CheckReach(ctx, a, inPublic, alice, chPrivate); !errors.Is(err, core.ErrUnreachable) {
		t.Fatalf("after Alice left: %v", err)
	}
}
