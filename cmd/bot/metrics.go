package main

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/marlowe-bot/marlowe/intent"
	"github.com/marlowe-bot/marlowe/memory"
)

// newMetrics exposes the filter's decision counts by reason (ignored
// messages are counted, never recorded) and memory's recall cost.
func newMetrics(f *intent.Filter, mem *memory.Service) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	for _, r := range intent.Reasons() {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name:        "marlowe_intent_decisions_total",
			Help:        "Messages seen by the intent filter, by decision reason.",
			ConstLabels: prometheus.Labels{"reason": r.String()},
		}, func() float64 { return float64(f.Counts().Get(r)) }))
	}
	if mem != nil {
		reg.MustRegister(memoryCollector{mem})
	}
	return reg
}

// memoryCollector reads memory.Stats at scrape time.
type memoryCollector struct{ mem *memory.Service }

var (
	memCounterDesc = prometheus.NewDesc("marlowe_memory_events_total", "Memory operations and outcomes, by event.", []string{"event"}, nil)
	memLatencyDesc = prometheus.NewDesc("marlowe_memory_recall_seconds", "Recall latency (one query or one turn).", nil, nil)
	memTokensDesc  = prometheus.NewDesc("marlowe_memory_recall_injected_tokens", "Estimated tokens injected per recall.", nil, nil)
	memSimDesc     = prometheus.NewDesc("marlowe_memory_recall_top_similarity", "Best dense similarity per recall, before the floor.", nil, nil)
)

func (c memoryCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- memCounterDesc
	ch <- memLatencyDesc
	ch <- memTokensDesc
	ch <- memSimDesc
}

func (c memoryCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.mem.Stats()
	for name, v := range map[string]uint64{
		"remember": s.Remembers, "remember_duplicate": s.RememberDuplicates, "remember_rejected": s.RememberRejected,
		"forget": s.Forgets, "delete": s.Deletes, "correct": s.Corrections, "recall": s.Recalls,
		"recall_degraded": s.DegradedRecalls, "embed_error": s.EmbedErrors, "below_floor": s.BelowFloor,
		"dedup_suppressed": s.DedupSuppressed, "injected_snippet": s.InjectedSnippets, "injected_token": s.InjectedTokens,
	} {
		ch <- prometheus.MustNewConstMetric(memCounterDesc, prometheus.CounterValue, float64(v), name)
	}
	for desc, h := range map[*prometheus.Desc]memory.Histogram{memLatencyDesc: s.RecallLatency, memTokensDesc: s.TurnTokens, memSimDesc: s.TopSimilarity} {
		buckets := make(map[float64]uint64, len(h.Bounds))
		for i, b := range h.Bounds {
			buckets[b] = h.Counts[i]
		}
		ch <- prometheus.MustNewConstHistogram(desc, h.Count(), h.Sum, buckets)
	}
}
