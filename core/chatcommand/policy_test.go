package chatcommand_test

import (
	"strings"
	"testing"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/chatcommand"
	"github.com/marlowe-bot/marlowe/core/gate"
)

// TestBudgetAsMoney: `policy set budget $5` sets the daily budget as an
// amount of money, a plain number stays a token budget, and clearing the
// budget clears both.
func TestBudgetAsMoney(t *testing.T) {
	reg, err := gate.NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	pol := core.Policy{DailyTokenBudget: 50000}
	for _, c := range []struct {
		value  string
		tokens int
		spend  float64
		err    string
	}{
		{value: "$5", tokens: 50000, spend: 5},
		{value: "2.50$", tokens: 50000, spend: 2.5},
		{value: "100000", tokens: 100000},
		{value: "$-3", err: "amount like $5"},
		{value: "$", err: "amount like $5"},
		{value: "none"},
	} {
		got, err := chatcommand.ApplyPolicySet(pol, reg, "budget", []string{c.value})
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: err = %v", c.value, err)
			}
			continue
		}
		if err != nil || got.DailyTokenBudget != c.tokens || got.DailySpendBudget != c.spend {
			t.Errorf("%s: tokens %d spend %v err %v, want %d %v", c.value, got.DailyTokenBudget, got.DailySpendBudget, err, c.tokens, c.spend)
		}
	}
	withSpend, _ := chatcommand.ApplyPolicySet(pol, reg, "budget", []string{"$5"})
	if d := chatcommand.DescribePolicy(withSpend, reg); !strings.Contains(d, "50000 tokens/day, $5.00/day (estimated spend)") {
		t.Errorf("policy shows %q", d)
	}
}
