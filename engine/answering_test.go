package engine_test

import (
	"slices"
	"testing"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/coretest"
)

// TestAnswerNamesTheMessageItAnswers: each run's answer carries the id of
// the person's message it answers (core.Outbound.Answering), which is how
// a surface that answered that message elsewhere (Discord's /marlowe
// response) finds where the answer goes; a follow-up's answer names the
// follow-up.
func TestAnswerNamesTheMessageItAnswers(t *testing.T) {
	h := newHarness(t, coretest.NewScriptedModel(coretest.Text("an answer")), nil)
	ev := h.mention(alice, "C1", "what is up?")
	h.deliver(ev)
	h.idle()
	follow := h.inThread(alice, "C1", ev.MessageID, "and now?")
	h.deliver(follow)
	h.idle()
	var got []string
	for _, p := range h.s.Posts() {
		if p.Out.Priority == core.PriorityHigh && p.Out.Card == nil {
			got = append(got, p.Out.Answering)
		}
	}
	if want := []string{ev.MessageID, follow.MessageID}; !slices.Equal(got, want) {
		t.Fatalf("answers name %q, want %q", got, want)
	}
}
