package coretest

import (
	"strings"
	"testing"

	"github.com/marlowe-bot/marlowe/core"
)

// ConversationOf is the earlier-conversation message of a model view (the
// history a run was given, as the engine renders it), or "".
func ConversationOf(v core.View) string {
	for _, m := range v.Messages {
		if strings.HasPrefix(m.Text, "Earlier in this conversation") {
			return m.Text
		}
	}
	return ""
}

// WantConversation fails tb unless v's earlier conversation holds turns in
// this order and v's last message is followUp: what a model asked about a
// follow-up must have received.
func WantConversation(tb testing.TB, v core.View, followUp string, turns ...string) string {
	tb.Helper()
	hist := ConversationOf(v)
	if hist == "" && len(turns) > 0 {
		tb.Fatalf("the model request for %q carries no conversation; it got:\n%+v", followUp, v.Messages)
	}
	at := 0
	for _, w := range turns {
		i := strings.Index(hist[at:], w)
		if i < 0 {
			tb.Fatalf("the model request for %q lacks the turn %q (in order); its conversation:\n%s", followUp, w, hist)
		}
		at += i + len(w)
	}
	if len(v.Messages) == 0 || !strings.HasSuffix(v.Messages[len(v.Messages)-1].Text, followUp) {
		tb.Fatalf("the model's last message is not the follow-up %q: %+v", followUp, v.Messages)
	}
	return hist
}
