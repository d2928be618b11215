package engine_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/coretest"
	"github.com/marlowe-bot/marlowe/engine"
)

// TestOversizedMessageIsJournaledWholeButCutForTheModel: a 200 KB paste is
// kept as received, but the model sees at most the limit of it, told that
// it was cut, and the person is told too.
func TestOversizedMessageIsJournaledWholeButCutForTheModel(t *testing.T) {
	for _, tc := range []struct {
		name  string
		limit int // 0: the default
		want  int
	}{
		{name: "default", want: engine.DefaultMaxInputChars},
		{name: "configured", limit: 500, want: 500},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := coretest.NewScriptedModel(coretest.Text("summary"), coretest.Text("second"))
			h := newHarness(t, m, nil, func(c *engine.Config) { c.MaxInputChars = tc.limit })
			huge := strings.Repeat("é log line with a secret at the end ", 5600) + "TAIL-MARKER"
			ev := h.mention(alice, "C1", huge)
			h.deliver(ev)
			h.idle()
			views := m.Views()
			if len(views) != 1 {
				t.Fatalf("model calls = %d", len(views))
			}
			got := lastText(views[0])
			if strings.Contains(got, "TAIL-MARKER") {
				t.Fatalf("the model saw the whole message")
			}
			if !strings.Contains(got, "message cut") {
				t.Errorf("no note that the message was cut: ...%s", got[max(0, len(got)-200):])
			}
			if n := utf8.RuneCountInString(got); n > tc.want+400 {
				t.Errorf("model saw %d characters, want at most %d plus a note", n, tc.want)
			}
			recv := payloads[*core.MessageReceived](h, "C1", core.KindMessageReceived)
			if len(recv) != 1 || !strings.HasSuffix(recv[0].Text, "TAIL-MARKER") {
				t.Errorf("journal did not keep the message whole")
			}
			if _, ok := h.s.Find("read only its first"); !ok {
				t.Errorf("the person was not told the message was cut: %+v", h.s.Posts())
			}
			// A short follow-up is not cut and carries no note.
			h.deliver(h.inThread(bob, "C1", ev.MessageID, "thanks"))
			h.idle()
			if v := m.Views(); len(v) != 2 || !strings.HasSuffix(lastText(v[1]), "thanks") {
				t.Errorf("follow-up view = %q", lastText(v[len(v)-1]))
			}
		})
	}
}
