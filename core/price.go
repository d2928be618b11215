package core

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// ModelPrice is what a model costs per million tokens, in the operator's
// currency (MARLOWE_MODEL_PRICES).
type ModelPrice struct {
	Input  float64 `json:"input"`
	Output float64 `json:"output"`
}

// Prices maps a model name to its price. A name also prices the dated
// variants providers answer with ("gpt-4o" prices "gpt-4o-2024-08-06"):
// the longest matching name wins.
type Prices map[string]ModelPrice

// ParsePrices reads MARLOWE_MODEL_PRICES: comma-separated
// model=input/output, each a price per million tokens, for example
// "gpt-4o=2.50/10,claude-sonnet-4=3/15".
func ParsePrices(s string) (Prices, error) {
	p := Prices{}
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, price, ok := strings.Cut(item, "=")
		in, out, ok2 := strings.Cut(price, "/")
		name = strings.TrimSpace(name)
		if !ok || !ok2 || name == "" {
			return nil, fmt.Errorf("price %q: want model=input/output (per million tokens), e.g. gpt-4o=2.50/10", item)
		}
		var mp ModelPrice
		for _, f := range []struct {
			s string
			v *float64
		}{{in, &mp.Input}, {out, &mp.Output}} {
			v, err := strconv.ParseFloat(strings.TrimSpace(f.s), 64)
			if err != nil || v < 0 {
				return nil, fmt.Errorf("price %q: %q is not a price per million tokens", item, strings.TrimSpace(f.s))
			}
			*f.v = v
		}
		if _, dup := p[name]; dup {
			return nil, fmt.Errorf("price for %q given twice", name)
		}
		p[name] = mp
	}
	return p, nil
}

// For is model's price: its own, or that of the longest name it starts
// with.
func (p Prices) For(model string) (ModelPrice, bool) {
	if mp, ok := p[model]; ok {
		return mp, true
	}
	best := ""
	for name := range p {
		if strings.HasPrefix(model, name) && len(name) > len(best) {
			best = name
		}
	}
	if best == "" {
		return ModelPrice{}, false
	}
	return p[best], true
}

// Cost estimates what u cost on model; false when model has no price.
func (p Prices) Cost(model string, u Usage) (float64, bool) {
	mp, ok := p.For(model)
	if !ok {
		return 0, false
	}
	return (float64(u.InputTokens)*mp.Input + float64(u.OutputTokens)*mp.Output) / 1e6, true
}

// Spend estimates what a day's usage by model cost; unpriced lists the
// models with no price (their tokens are not in the sum).
func (p Prices) Spend(byModel map[string]Usage) (cost float64, unpriced []string) {
	for model, u := range byModel {
		c, ok := p.Cost(model, u)
		if !ok {
			unpriced = append(unpriced, model)
			continue
		}
		cost += c
	}
	slices.Sort(unpriced)
	return cost, unpriced
}
