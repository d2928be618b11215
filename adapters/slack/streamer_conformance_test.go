package slack

import (
	"testing"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/streamertest"
)

// Slack's agent surface passes the core.Streamer conformance suite against
// slackfake; the message is read back from the fake.
func TestStreamerConformance(t *testing.T) {
	streamertest.Run(t, func(t *testing.T) streamertest.Harness {
		f := agentFake(t, AgentScope)
		root := f.AddMessage(chPublic, "", alice, "is the build green?")
		a, _ := newAdapter(t, testConfig(f, ModeSocket))
		return streamertest.Harness{
			Streamer: a,
			Restart: func(t *testing.T) core.Streamer {
				next, _ := newAdapter(t, testConfig(f, ModeSocket))
				return next
			},
			Scope:     core.Scope{Platform: Platform, Workspace: f.Config().TeamID, Channel: chPublic, Thread: root},
			Recipient: alice,
			Text: func(t *testing.T, ref core.MessageRef) string {
				t.Helper()
				m, ok := f.Message(chPublic, ref.ID)
				if !ok {
					t.Fatal("the stream's message is gone")
				}
				return m.Text
			},
		}
	})
}
