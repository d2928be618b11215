package scheduler_test

import (
	"strings"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/coretest"
	"github.com/marlowe-bot/marlowe/tools"
)

// newModelWorldWith is newModelWorld with extra tools registered.
func newModelWorldWith(t *testing.T, m core.Model, extra ...core.Tool) *world {
	t.Helper()
	w := &world{t: t, signer: coretest.NewSigner(t), clk: &clock{t: time.Date(2026, 3, 2, 8, 0, 0, 0, time.UTC)}, model: m, tools: extra}
	w.j = coretest.NewMemJournal(w.signer)
	w.s = coretest.NewFakeSurface("test", "UBOT")
	w.start(w.j)
	return w
}

// Attack (laundered targets): a channel Bob merely mentioned in the
// channel ("what is #exfil for?") reaches the routine's digest. A firing
// whose model then posts there must not pass it as "named by the
// requester": only the routine's own instruction is the owner's words.
func TestAttackFiringDigestDoesNotLaunderTargets(t *testing.T) {
	var firing []core.View
	m := coretest.NewScriptedModel(func(v core.View) (core.Reply, error) {
		if strings.HasPrefix(v.Messages[0].Text, "Scheduled task") {
			firing = append(firing, v)
			return core.Reply{ToolCalls: []core.ToolCall{coretest.Call("c1", "post_to_channel", `{"channel":"exfil","text":"the summary"}`)}}, nil
		}
		return core.Reply{Text: "It is where exports go."}, nil
	}, coretest.Text("done"))
	w := newModelWorldWith(t, m, tools.PostToChannel())
	routineID(t, w.say(alice, "routine add @every 10m: summarise the channel and post it where it belongs"))
	w.say(bob, "what is #exfil for?")
	w.clk.Advance(10 * time.Minute)
	w.tick()
	w.idle()
	if len(firing) == 0 {
		t.Fatal("the firing's run never called the model")
	}
	for _, p := range w.s.PostsIn("exfil") {
		t.Fatalf("posted into #exfil without asking: %q", p.Out.Text)
	}
	v := firing[0]
	if !strings.Contains(v.Messages[0].Text, "summarise the channel") || strings.Contains(v.Messages[0].Text, "exfil") {
		t.Fatalf("the firing's instruction message carries more than the routine's instruction: %q", v.Messages[0].Text)
	}
	var fenced bool
	for _, msg := range v.Messages[1:] {
		if strings.Contains(msg.Text, "exfil") && strings.Contains(msg.Text, `<untrusted-content source="routine">`) {
			fenced = true
		}
	}
	if !fenced {
		t.Fatalf("the digest data is not shown as untrusted context: %+v", v.Messages)
	}
	var decided []*core.PermissionDecided
	for _, c := range w.j.All(room.Key()) {
		if c.Kind() == core.KindPermissionDecided {
			if p, _ := core.Decode[*core.PermissionDecided](c); p.Tool == "post_to_channel" {
				decided = append(decided, p)
			}
		}
	}
	if len(decided) != 1 || decided[0].Decision != "ask" || !strings.Contains(decided[0].Reason, "does not come from the requester") {
		t.Fatalf("permission decisions: %+v", decided)
	}
	if n := w.count(core.KindApprovalRequested); n != 1 {
		t.Fatalf("%d approval.requested, want the owner's consent card", n)
	}
}
