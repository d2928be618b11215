package main

import (
	"strings"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/adapters/slack/slackfake"
	"github.com/marlowe-bot/marlowe/llm/llmtest"
)

// TestQARoutines runs `bot serve` against the fake Slack and model: a typed
// routine fires on time as an unattended model run whose answer is posted
// at the channel's top level, the next firing is seeded with what the last
// one posted (run history), `routine pause` stops it, and a reply in a
// firing's thread is answered (window).
func TestQARoutines(t *testing.T) {
	t.Parallel()
	b := startQA(t, qaOpts{env: map[string]string{
		"MARLOWE_ROUTINE_MIN_INTERVAL": "1s",
		"MARLOWE_ROUTINE_TICK":         "50ms",
	}})
	b.slack.Say(qaGeneral, "", qaAlice, b.mention+" routine add @every 1s: qa digest")
	armed := b.waitPost("routine armed", hasText("armed"))
	_, rest, _ := strings.Cut(armed.Text, "Routine ")
	id, _, _ := strings.Cut(rest, " ")
	// The fake model echoes the last message it is shown: the firing's
	// context (run history and digest data), which follows its instruction.
	isDigest := func(p slackfake.Post) bool {
		return p.Channel == qaGeneral && p.ThreadTS == "" && strings.Contains(p.Text, "You said: Data for the task") && strings.Contains(p.Text, "Run history")
	}
	digest := b.waitPost("the first firing's post", isDigest)
	b.waitPost("the second firing's post, seeded with the first's", func(p slackfake.Post) bool {
		return isDigest(p) && p.TS != digest.TS && strings.Contains(p.Text, "Last successful firing")
	})

	b.slack.Say(qaGeneral, "", qaAlice, b.mention+" routine pause "+id)
	// A firing every second keeps the channel's runs busy; on a loaded
	// machine the pause's answer can queue behind several of them.
	paused := b.waitPostFor(30*time.Second, "routine paused", hasText("paused"))
	// A firing already running when the pause lands may still post (on a
	// loaded machine it can take seconds); what the pause guarantees is
	// that no firing starts after it, so the digests stop: a routine firing
	// every second never leaves a 2.5 s gap.
	b.settles("posts after pause", 2500*time.Millisecond, 20*time.Second, func(p slackfake.Post) bool {
		return isDigest(p) && p.At.After(paused.At)
	})

	b.model.Enqueue(llmtest.Text("threadkiwi: it is the routine's post"))
	b.slack.Say(qaGeneral, digest.TS, qaBob, "what is this?")
	b.waitPost("an answer in the firing's thread", func(p slackfake.Post) bool {
		return p.ThreadTS == digest.TS && strings.Contains(p.Text, "threadkiwi")
	})
	b.verify()
}
