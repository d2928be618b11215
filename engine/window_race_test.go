package engine_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/coretest"
	"github.com/marlowe-bot/marlowe/engine"
	"github.com/marlowe-bot/marlowe/intent"
)

// TestWindowIsOpenWhenTheAnswerAppears: someone (or a script) replies in
// the thread the instant the bot's answer is on the platform, before the
// engine has journaled it. The reply must be routed: the windows the post
// opens are open before the platform shows it.
func TestWindowIsOpenWhenTheAnswerAppears(t *testing.T) {
	var filter *intent.Filter
	var routedAtPost atomic.Int32
	var checked atomic.Bool
	m := coretest.NewScriptedModel(coretest.Text("here you go"))
	h := newHarness(t, m, nil, func(c *engine.Config) {
		filter = intent.NewFilter(intent.NewMemoryStore(c.Boundary.Now), c.Boundary.Now)
		c.Router = core.RouterFunc(func(ctx context.Context, ev core.Event) (bool, string, error) {
			d, err := filter.Decide(ctx, ev)
			return d.Route, d.Reason.String(), err
		})
		c.PostObserver = filter
	})
	ev := h.mention(alice, "C1", "a question")
	h.s.FailPost = func(out core.Outbound) error {
		if out.Text != "here you go" || checked.Swap(true) {
			return nil
		}
		// The answer is about to land: a follow-up arriving now.
		reply := h.inThread(bob, "C1", ev.MessageID, "thanks, and one more thing")
		reply.MentionsBot = false
		d, err := filter.Decide(context.Background(), reply)
		if err == nil && d.Route {
			routedAtPost.Add(1)
		}
		return nil
	}
	h.deliver(ev)
	h.idle()
	if !checked.Load() {
		t.Fatalf("the answer was never posted: %+v", h.s.Posts())
	}
	if routedAtPost.Load() != 1 {
		t.Fatalf("a reply arriving as the answer appeared was not routed (window not yet open)")
	}
}
