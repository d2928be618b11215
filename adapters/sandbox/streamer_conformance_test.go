package sandbox

import (
	"testing"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/streamertest"
)

// The sandbox passes the core.Streamer conformance suite; the message is
// read back from the workspace's store.
func TestStreamerConformance(t *testing.T) {
	streamertest.Run(t, func(t *testing.T) streamertest.Harness {
		s := newSandbox(t, Config{})
		root := botPost(t, s, "root", "general", "", "a root to reply under")
		return streamertest.Harness{
			Streamer: s,
			// The sandbox is its own platform: what a new process knows is
			// its data file, which this instance already holds.
			Restart: func(*testing.T) core.Streamer { return s },
			Scope:   streamScope(root.ID),
			Text:    func(t *testing.T, ref core.MessageRef) string { return msgOf(t, s, ref.ID).Text },
		}
	})
}
