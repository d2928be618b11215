package main

import (
	"strings"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/adapters/slack/slackfake"
	"github.com/marlowe-bot/marlowe/llm/llmtest"
)

// TestQARoutines runs `bot serve` against the fake Slack and model: a typed
// routine posts its digest at the channel's top level on time, a reply in
// the digest's thread is answered (window), and `routine pause` stops it.
func TestQARoutines(t *testing.T) {
	b := startQA(t, qaOpts{env: map[string]string{
		"MARLOWE_ROUTINE_MIN_INTERVAL": "1s",
		"MARLOWE_ROUTINE_TICK":         "50ms",
	}})
	b.slack.Say(qaGeneral, "", qaAlice, b.mention+" routine add @every 1s: qa digest")
	armed := b.waitPost("routine armed", hasText("armed"))
	_, rest, _ := strings.Cut(armed.Text, "Routine ")
	id, _, _ := strings.Cut(rest, " ")
	isDigest := func(p slackfake.Post) bool {
		return p.Channel == qaGeneral && p.ThreadTS == "" && strings.Contains(p.Text, "Routine "+id+": qa digest")
	}
	digest := b.waitPost("the first digest", isDigest)
	// The window opens when the post is journaled, just after Slack has it:
	// the next digest (posted after that, by the same pass loop) says so.
	b.waitPost("the second digest", func(p slackfake.Post) bool { return isDigest(p) && p.TS != digest.TS })

	b.model.Enqueue(llmtest.Text("threadkiwi: it is the routine's digest"))
	b.slack.Say(qaGeneral, digest.TS, qaBob, "what is this?")
	b.waitPost("an answer in the digest's thread", func(p slackfake.Post) bool {
		return p.ThreadTS == digest.TS && strings.Contains(p.Text, "threadkiwi")
	})

	b.slack.Say(qaGeneral, "", qaAlice, b.mention+" routine pause "+id)
	paused := b.waitPost("routine paused", hasText("paused"))
	b.quiet("digests after pause", 2500*time.Millisecond, func(p slackfake.Post) bool {
		return isDigest(p) && p.At.After(paused.At)
	})
	b.verify()
}
