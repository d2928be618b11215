package sandbox

import (
	"context"
	"errors"
	"testing"

	"github.com/marlowe-bot/marlowe/core"
)

// ATTACK (rooms the requester cannot reach), in the sandbox: Carol cannot
// have the bot post into #private-team (Alice and Bob only) or into Bob's
// DM; Alice can reach #private-team and #random. Before, the sandbox was
// not asked at all.
func TestSandboxReachability(t *testing.T) {
	s := newSandbox(t, Config{})
	ctx := context.Background()
	in := core.Scope{Platform: Platform, Workspace: Workspace, Channel: "general"}
	for _, tc := range []struct {
		requester, target string
		ok                bool
	}{
		{"carol", "private-team", false},
		{"carol", "dm-bob", false},
		{"alice", "dm-bob", false},
		{"alice", "private-team", true},
		{"alice", "random", true},
		{"bob", "dm-bob", true},
		{"alice", "no-such-channel", false},
	} {
		err := core.CheckReach(ctx, s, in, tc.requester, tc.target)
		if tc.ok != (err == nil) || (err != nil && !errors.Is(err, core.ErrUnreachable)) {
			t.Errorf("%s → %s: %v (want reachable %v)", tc.requester, tc.target, err, tc.ok)
		}
	}
}
