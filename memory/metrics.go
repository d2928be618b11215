package memory

import (
	"slices"
	"sync"
	"sync/atomic"
)

// Stats is a point-in-time copy of the service's counters and histograms,
// for the composition root to export (Prometheus or logs). Counters only
// grow; histograms are cumulative in the Prometheus sense (Counts[i] counts
// observations <= Bounds[i], the last entry is +Inf).
type Stats struct {
	Remembers          uint64 // memories written (journaled and indexed)
	RememberDuplicates uint64 // remembers answered with an existing memory (same origin)
	RememberRejected   uint64 // empty or too long
	Forgets            uint64
	Deletes            uint64
	Corrections        uint64
	Recalls            uint64 // queries served (a turn of n queries counts n)
	DegradedRecalls    uint64 // served lexical-only (no embedder, or it failed)
	EmbedErrors        uint64 // embedder calls that failed (remember, recall, rebuild)
	BelowFloor         uint64 // dense candidates dropped by the similarity floor
	DedupSuppressed    uint64 // hits not injected because the thread already had them
	InjectedSnippets   uint64
	InjectedTokens     uint64 // estimate: injected characters / 4
	// RecallLatency is seconds per recall (one query or one turn).
	RecallLatency Histogram
	// TopSimilarity is the best dense similarity of each recall that had a
	// dense cue, before the floor: the distribution the floor is set from.
	TopSimilarity Histogram
	// TurnTokens is the injected token estimate per recall call.
	TurnTokens Histogram
}

// Histogram is a cumulative bucketed distribution.
type Histogram struct {
	Bounds []float64 // upper bounds, ascending
	Counts []uint64  // cumulative; len(Bounds)+1, the last is the total
	Sum    float64
}

// Count is the number of observations.
func (h Histogram) Count() uint64 {
	if len(h.Counts) == 0 {
		return 0
	}
	return h.Counts[len(h.Counts)-1]
}

type histogram struct {
	mu     sync.Mutex
	bounds []float64
	counts []uint64 // per bucket, not cumulative; last = overflow
	sum    float64
}

func newHistogram(bounds ...float64) *histogram {
	return &histogram{bounds: bounds, counts: make([]uint64, len(bounds)+1)}
}

func (h *histogram) observe(v float64) {
	i, _ := slices.BinarySearch(h.bounds, v)
	h.mu.Lock()
	h.counts[i]++
	h.sum += v
	h.mu.Unlock()
}

func (h *histogram) snapshot() Histogram {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := Histogram{Bounds: slices.Clone(h.bounds), Counts: make([]uint64, len(h.counts)), Sum: h.sum}
	var run uint64
	for i, c := range h.counts {
		run += c
		out.Counts[i] = run
	}
	return out
}

type metrics struct {
	remembers, duplicates, rejected, forgets, deletes, corrections atomic.Uint64
	recalls, degraded, embedErrors, belowFloor, suppressed         atomic.Uint64
	snippets, tokens                                               atomic.Uint64
	latency, topSim, turnTokens                                    *histogram
}

func newMetrics() *metrics {
	return &metrics{
		latency:    newHistogram(0.001, 0.0025, 0.005, 0.01, 0.02, 0.03, 0.05, 0.1, 0.25, 0.5, 1, 2.5),
		topSim:     newHistogram(0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9, 1),
		turnTokens: newHistogram(0, 50, 100, 200, 300, 400, 500, 600, 800, 1000),
	}
}

func (m *metrics) recall(r Result, queries int) {
	m.recalls.Add(uint64(queries))
	if r.Degraded {
		m.degraded.Add(uint64(queries))
	}
	m.snippets.Add(uint64(len(r.Snippets)))
	m.tokens.Add(uint64(r.Tokens))
	m.latency.observe(r.Latency.Seconds())
	m.turnTokens.observe(float64(r.Tokens))
}

func (m *metrics) snapshot() Stats {
	return Stats{
		Remembers: m.remembers.Load(), RememberDuplicates: m.duplicates.Load(), RememberRejected: m.rejected.Load(),
		Forgets: m.forgets.Load(), Deletes: m.deletes.Load(), Corrections: m.corrections.Load(),
		Recalls: m.recalls.Load(), DegradedRecalls: m.degraded.Load(), EmbedErrors: m.embedErrors.Load(),
		BelowFloor: m.belowFloor.Load(), DedupSuppressed: m.suppressed.Load(),
		InjectedSnippets: m.snippets.Load(), InjectedTokens: m.tokens.Load(),
		RecallLatency: m.latency.snapshot(), TopSimilarity: m.topSim.snapshot(), TurnTokens: m.turnTokens.snapshot(),
	}
}
