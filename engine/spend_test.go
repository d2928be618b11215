package engine_test

import (
	"strings"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/coretest"
	"github.com/marlowe-bot/marlowe/engine"
)

// TestDailySpendBudget: a channel's daily budget set as money stops runs
// once the day's estimated spend reaches it, `status` shows the spend
// beside the tokens, another channel is unaffected and the next day is
// fresh. Each call costs 0.12: 100 input and 20 output tokens at 1000
// per million each.
func TestDailySpendBudget(t *testing.T) {
	m := coretest.NewScriptedModel(coretest.Text("ok"))
	h := newHarness(t, m, nil, func(c *engine.Config) {
		c.Prices = core.Prices{"scripted": {Input: 1000, Output: 1000}}
		c.DefaultPolicy = core.Policy{DailySpendBudget: 0.20}
	})
	h.deliver(h.mention(alice, "C1", "one"))
	h.idle()
	h.deliver(h.mention(alice, "C1", "two"))
	h.idle()
	h.deliver(h.mention(bob, "C1", "three"))
	h.idle()
	if m.Calls() != 2 {
		t.Errorf("model calls = %d, want 2 (the third run is over the daily spend budget)", m.Calls())
	}
	if p, ok := h.s.Find("daily spend budget"); !ok || !strings.Contains(p.Out.Text, "$0.20") {
		t.Errorf("notice = %+v", p.Out.Text)
	}
	if got := h.say(bob, "status"); !strings.Contains(got, "240 tokens, about $0.24 estimated of a $0.20 daily budget") {
		t.Errorf("status = %q", got)
	}
	h.deliver(h.mention(alice, "C2", "other channel"))
	h.idle()
	h.clk.Advance(24 * time.Hour)
	h.deliver(h.mention(alice, "C1", "tomorrow"))
	h.idle()
	if m.Calls() != 4 {
		t.Errorf("model calls = %d, want 4 (another channel and the next day spend afresh)", m.Calls())
	}
}

// TestStatusNamesUnpricedModels: a model without a price is named, not
// counted as free.
func TestStatusNamesUnpricedModels(t *testing.T) {
	m := coretest.NewScriptedModel(coretest.Text("ok"))
	h := newHarness(t, m, nil, func(c *engine.Config) {
		c.Prices = core.Prices{"gpt-4o": {Input: 2.5, Output: 10}}
	})
	h.deliver(h.mention(alice, "C1", "one"))
	h.idle()
	if got := h.say(bob, "status"); !strings.Contains(got, "120 tokens, about $0.00 estimated (no price for scripted)") {
		t.Errorf("status = %q", got)
	}
}
