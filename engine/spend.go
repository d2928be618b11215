package engine

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/marlowe-bot/marlowe/core"
)

// Spend: the model prices (Config.Prices) turn the tokens the channel's
// fold counts per UTC day and model into an estimated spend, which the
// daily budget set as money (`policy set budget $5`) is judged by, and
// which `status` and the metrics show beside the tokens. Estimates: the
// provider's bill is what counts.

// SpendMetrics hears of each model call's usage with its channel and
// estimated cost (priced false: the model has no price). A Config.Metrics
// that implements it is told; it must not block.
type SpendMetrics interface {
	ModelSpent(ch core.ChannelKey, model string, u core.Usage, cost float64, priced bool)
}

func (e *Engine) spent(sc core.Scope, r core.Reply, err error) {
	m, ok := e.cfg.Metrics.(SpendMetrics)
	if !ok || err != nil || r.Usage == (core.Usage{}) {
		return
	}
	cost, priced := e.cfg.Prices.Cost(r.Model, r.Usage)
	m.ModelSpent(sc.Key(), r.Model, r.Usage, cost, priced)
}

// daySpend is the channel's estimated spend today (UTC) and the models
// that have no price. Callers hold v.mu.
func (e *Engine) daySpendLocked(v *chanView) (float64, []string) {
	return e.cfg.Prices.Spend(v.fold.UsageOn(e.now()))
}

// overSpend names the money budget when it is used up, or "".
func (d *driver) overSpend(pol core.Policy) string {
	if pol.DailySpendBudget <= 0 {
		return ""
	}
	var spend float64
	_ = d.v.with(context.Background(), func() { spend, _ = d.e.daySpendLocked(d.v) })
	if spend >= pol.DailySpendBudget {
		return fmt.Sprintf("this channel's daily spend budget (%s, estimated from the model prices) is used up; it resets at midnight UTC", money(pol.DailySpendBudget))
	}
	return ""
}

// spendLine is `status`'s line on today's tokens and estimated spend.
func (d *driver) spendLine(ctx context.Context) string {
	var tokens int
	var spend float64
	var unpriced []string
	var pol core.Policy
	_ = d.v.with(ctx, func() {
		tokens = d.v.fold.TokensOn(d.e.now())
		spend, unpriced = d.e.daySpendLocked(d.v)
		pol = d.e.policyLocked(d.v)
	})
	var b strings.Builder
	b.WriteString("\nToday (UTC): " + thousands(tokens) + " tokens")
	switch {
	case len(d.e.cfg.Prices) == 0:
		// No prices configured: tokens only.
	case len(unpriced) > 0:
		fmt.Fprintf(&b, ", about %s estimated (no price for %s)", money(spend), strings.Join(unpriced, ", "))
	default:
		fmt.Fprintf(&b, ", about %s estimated", money(spend))
	}
	if pol.DailySpendBudget > 0 {
		fmt.Fprintf(&b, " of a %s daily budget", money(pol.DailySpendBudget))
	}
	b.WriteString(".")
	return b.String()
}

func money(v float64) string { return "$" + strconv.FormatFloat(v, 'f', 2, 64) }

func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
