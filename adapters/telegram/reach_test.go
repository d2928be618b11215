package telegram

import (
	"context"
	"errors"
	"testing"

	"github.com/marlowe-bot/marlowe/core"
)

// ATTACK (rooms the requester cannot reach), on Telegram: the one
// reachability rule (core.CheckReach) asked of the real adapter against
// the fake (getChatMember, asked each time). From her private chat Alice
// cannot post into Bob's; nor into a group she is not a member of, until
// she joins (and no longer once she has left).
func TestTelegramReachability(t *testing.T) {
	const alice, bob = "1001", "1002"
	const group, otherGroup = int64(-100200), int64(-100300)
	f := newFake(t)
	f.SetMembers(group, 1001, 1002)
	f.SetMembers(otherGroup, 1002)
	a, _ := newAdapter(t, testConfig(f, ModePolling))
	ctx := context.Background()
	inAliceChat := core.Scope{Platform: Platform, Channel: alice}
	inGroup := core.Scope{Platform: Platform, Channel: "-100200"}
	for _, tc := range []struct {
		name      string
		from      core.Scope
		requester string
		target    string
		ok        bool
	}{
		{"private chat to another person's", inAliceChat, alice, bob, false},
		{"group to a person's private chat", inGroup, alice, bob, false},
		{"group to her own private chat", inGroup, alice, alice, true},
		{"a group she is not in", inGroup, alice, "-100300", false},
		{"a group she is in", inAliceChat, alice, "-100200", true},
		{"a topic of a group she is in", inAliceChat, alice, "-100200:7", true},
		{"not a chat id", inAliceChat, alice, "#general", false},
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
	f.SetMembers(otherGroup, 1002, 1001)
	if err := core.CheckReach(ctx, a, inGroup, alice, "-100300"); err != nil {
		t.Fatalf("after Alice joined: %v", err)
	}
	f.SetMembers(otherGroup, 1002)
	if err := core.CheckReach(ctx, a, inGroup, alice, "-100300"); !errors.Is(err, core.ErrUnreachable) {
		t.Fatalf("after Alice left: %v", err)
	}
}
