package memorytest

import (
	"slices"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/memory"
)

// BenchRecall measures recalls over d through svc: each iteration is one
// turn of `queries` queries (1: a single recall; 3: enough for the turn
// budget of six snippets to fill), each about a stored memory of a rotating
// channel. It reports latency percentiles and the injected tokens per turn,
// which must not grow with the corpus.
func BenchRecall(b *testing.B, svc *memory.Service, d *Dataset, queries int) {
	ctx := b.Context()
	var lat []time.Duration
	tokens, snippets, turns, degraded := 0, 0, 0, 0
	for i := 0; b.Loop(); i++ {
		c := i % len(d.Channels)
		qs := make([]string, queries)
		for j := range qs {
			qs[j] = d.QueryText(c, i*7+j)
		}
		r, err := svc.For(d.Channels[c]).RecallTurn(ctx, qs...)
		if err != nil {
			b.Fatal(err)
		}
		lat = append(lat, r.Latency)
		tokens += r.Tokens
		snippets += len(r.Snippets)
		turns++
		if r.Degraded {
			degraded++
		}
	}
	if turns == 0 {
		return
	}
	slices.Sort(lat)
	pct := func(p float64) float64 {
		return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Microseconds()) / 1000
	}
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.95), "p95-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(float64(tokens)/float64(turns), "tokens/turn")
	b.ReportMetric(float64(snippets)/float64(turns), "snippets/turn")
	if degraded > 0 {
		b.Errorf("%d of %d turns were degraded", degraded, turns)
	}
}
