package core_test

import (
	"math"
	"strings"
	"testing"

	"github.com/marlowe-bot/marlowe/core"
)

func TestParsePrices(t *testing.T) {
	cases := []struct {
		in   string
		want core.Prices
		err  string
	}{
		{in: "", want: core.Prices{}},
		{in: "gpt-4o=2.50/10, claude-sonnet-4=3/15", want: core.Prices{"gpt-4o": {2.5, 10}, "claude-sonnet-4": {3, 15}}},
		{in: "gpt-4o=2.5", err: "model=input/output"},
		{in: "=1/2", err: "model=input/output"},
		{in: "m=a/2", err: `"a" is not a price`},
		{in: "m=-1/2", err: `"-1" is not a price`},
		{in: "m=1/2,m=1/3", err: "given twice"},
	}
	for _, c := range cases {
		got, err := core.ParsePrices(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: err = %v, want %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil || len(got) != len(c.want) {
			t.Errorf("%q: %v, %v", c.in, got, err)
			continue
		}
		for k, v := range c.want {
			if got[k] != v {
				t.Errorf("%q: %s = %v, want %v", c.in, k, got[k], v)
			}
		}
	}
}

func TestCostPricesDatedVariantsByTheLongestName(t *testing.T) {
	p := core.Prices{"gpt-4o": {2.5, 10}, "gpt-4o-mini": {0.15, 0.6}}
	u := core.Usage{InputTokens: 1_000_000, OutputTokens: 100_000}
	for model, want := range map[string]float64{"gpt-4o": 3.5, "gpt-4o-2024-08-06": 3.5, "gpt-4o-mini-2024-07-18": 0.21} {
		got, ok := p.Cost(model, u)
		if !ok || math.Abs(got-want) > 1e-9 {
			t.Errorf("%s: %v %v, want %v", model, got, ok, want)
		}
	}
	if _, ok := p.Cost("claude", u); ok {
		t.Error("an unpriced model has a cost")
	}
	cost, unpriced := p.Spend(map[string]core.Usage{"gpt-4o": u, "claude": u})
	if math.Abs(cost-3.5) > 1e-9 || len(unpriced) != 1 || unpriced[0] != "claude" {
		t.Errorf("spend = %v, unpriced %v", cost, unpriced)
	}
}
