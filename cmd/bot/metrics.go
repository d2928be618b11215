package main

import (
	"context"
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/engine"
	"github.com/marlowe-bot/marlowe/intent"
	pq "github.com/marlowe-bot/marlowe/internal/pacer"
	"github.com/marlowe-bot/marlowe/memory"
)

// opsMetrics is serve's one collector: counters the engine and the
// surfaces feed as things happen (RunMetrics, ack observers), and gauges
// read at scrape time. It registers on its own registry, never the
// process-wide default one.
type opsMetrics struct {
	reg *prometheus.Registry

	runsEnded   *prometheus.CounterVec
	modelSecs   prometheus.Histogram
	modelErrors *prometheus.CounterVec
	modelTokens *prometheus.CounterVec
	ackSecs     *prometheus.HistogramVec
	answerSecs  *prometheus.HistogramVec
	paceSecs    *prometheus.HistogramVec

	// engine and channelsOwned are set by the composition root once the
	// engine exists (scrapes come later: the HTTP server starts after).
	// channelsOwned counts the channels this replica drives; today that is
	// every channel the engine has loaded, and with channel leases it is
	// the leases held: set it to whatever knows.
	engine        func() engine.Stats
	channelsOwned func() int
	draining      func() bool
}

// outboundStatser is a surface whose writes go through a pacer.
type outboundStatser interface {
	OutboundStats() pq.Stats
}

// paceObservable is a surface that can report how long each write waited
// in its pacing, by method.
type paceObservable interface {
	SetPaceObserver(func(method string, wait time.Duration))
}

// ackObservable is a surface that can report its acknowledgement latency.
type ackObservable interface {
	SetAckObserver(func(time.Duration))
}

// newMetrics builds the collector over the filter's decision counts by
// reason (ignored messages are counted, never recorded), memory's recall
// cost, and each surface's outbound queue and ack latency.
func newMetrics(f *intent.Filter, mem *memory.Service, surfaces map[string]core.Surface) *opsMetrics {
	m := &opsMetrics{
		reg: prometheus.NewRegistry(),
		runsEnded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "marlowe_runs_ended_total",
			Help: "Runs that reached a terminal status on this replica, by status (done, broken, cancelled).",
		}, []string{"status"}),
		modelSecs: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "marlowe_model_call_seconds",
			Help:    "Latency of each model call attempt, failed ones included.",
			Buckets: []float64{.1, .25, .5, 1, 2, 5, 10, 20, 30, 60, 120},
		}),
		modelErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "marlowe_model_errors_total",
			Help: "Failed model call attempts, by failure (rate-limited, unavailable, timeout, auth, bad-request, bad-response, cancelled, other).",
		}, []string{"failure"}),
		modelTokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "marlowe_model_tokens_total",
			Help: "Tokens the model reported using, by kind (input, output).",
		}, []string{"kind"}),
		ackSecs: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "marlowe_ack_seconds",
			Help:    "Time from receiving a platform delivery to acknowledging it, by platform (only deliveries acknowledged after being delivered).",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2, 3, 5},
		}, []string{"platform"}),
		answerSecs: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "marlowe_answer_seconds",
			Help:    "Time from a routed message's arrival (journaled) to its answer's post (journaled), by platform.",
			Buckets: []float64{.05, .1, .25, .5, 1, 2, 5, 10, 20, 30, 60, 120},
		}, []string{"platform"}),
		paceSecs: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "marlowe_pacing_wait_seconds",
			Help:    "Time a platform write waited in the outbound pacing before it was sent, by platform and method (decorations sent count 0; dropped ones are in marlowe_outbound_decorations_dropped_total).",
			Buckets: []float64{.001, .01, .05, .1, .25, .5, 1, 2, 5, 10, 30},
		}, []string{"platform", "method"}),
	}
	for _, st := range []core.RunStatus{core.RunDone, core.RunBroken, core.RunCancelled} {
		m.runsEnded.WithLabelValues(string(st)) // present at 0 before the first end
	}
	for _, k := range []string{"input", "output"} {
		m.modelTokens.WithLabelValues(k)
	}
	m.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.runsEnded, m.modelSecs, m.modelErrors, m.modelTokens, m.ackSecs, m.answerSecs, m.paceSecs)
	for _, r := range intent.Reasons() {
		m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name:        "marlowe_intent_decisions_total",
			Help:        "Messages seen by the intent filter, by decision reason.",
			ConstLabels: prometheus.Labels{"reason": r.String()},
		}, func() float64 { return float64(f.Counts().Get(r)) }))
	}
	if mem != nil {
		m.reg.MustRegister(memoryCollector{mem})
	}
	m.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "marlowe_approvals_pending",
			Help: "Approvals waiting for a decision, with their deadline armed on this replica.",
		}, func() float64 { return float64(m.engineStats().PendingApprovals) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "marlowe_channels_owned",
			Help: "Channels this replica drives.",
		}, func() float64 {
			if m.channelsOwned == nil {
				return 0
			}
			return float64(m.channelsOwned())
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "marlowe_draining",
			Help: "1 while this replica drains for shutdown (it refuses new deliveries), else 0.",
		}, func() float64 {
			if m.draining != nil && m.draining() {
				return 1
			}
			return 0
		}),
	)
	for _, name := range slices.Sorted(maps.Keys(surfaces)) {
		s := surfaces[name]
		if o, ok := s.(outboundStatser); ok {
			labels := prometheus.Labels{"platform": name}
			m.reg.MustRegister(
				prometheus.NewGaugeFunc(prometheus.GaugeOpts{
					Name: "marlowe_outbound_queued", ConstLabels: labels,
					Help: "Platform writes waiting in the outbound queue (one being sent counts), by platform.",
				}, func() float64 { return float64(o.OutboundStats().Queued) }),
				prometheus.NewCounterFunc(prometheus.CounterOpts{
					Name: "marlowe_outbound_rate_limited_total", ConstLabels: labels,
					Help: "Rate-limit refusals (HTTP 429) of platform writes, waited out and retried, by platform.",
				}, func() float64 { return float64(o.OutboundStats().RateLimited) }),
				prometheus.NewCounterFunc(prometheus.CounterOpts{
					Name: "marlowe_outbound_decorations_dropped_total", ConstLabels: labels,
					Help: "Reactions, typing and status updates dropped over their budget (never queued behind an answer), by platform.",
				}, func() float64 { return float64(o.OutboundStats().Dropped) }),
			)
		}
		if p, ok := s.(paceObservable); ok {
			platform := name
			p.SetPaceObserver(func(method string, wait time.Duration) {
				m.paceSecs.WithLabelValues(platform, method).Observe(wait.Seconds())
			})
		}
		if q, ok := s.(deliveryQueuer); ok {
			m.reg.MustRegister(deliveryQueueCollector{platform: name, q: q})
		}
		if a, ok := s.(ackObservable); ok {
			h := m.ackSecs.WithLabelValues(name)
			a.SetAckObserver(func(d time.Duration) { h.Observe(d.Seconds()) })
		}
	}
	return m
}

// observePosts wraps the engine's post observer: each answer's latency
// from the arrival of the message it answers goes to marlowe_answer_seconds.
func (m *opsMetrics) observePosts(next core.PostObserver) core.PostObserver {
	return answerLatency{m: m, next: next}
}

type answerLatency struct {
	m    *opsMetrics
	next core.PostObserver
}

// ObservePost implements core.PostObserver.
func (a answerLatency) ObservePost(ctx context.Context, p core.PostedMessage) error {
	if p.Role == core.RoleAnswer && !p.AnsweringAt.IsZero() && !p.At.IsZero() {
		a.m.answerSecs.WithLabelValues(p.Scope.Platform).Observe(p.At.Sub(p.AnsweringAt).Seconds())
	}
	if a.next == nil {
		return nil
	}
	return a.next.ObservePost(ctx, p)
}

// ObservePostIntent implements core.PostIntentObserver for a next that does.
func (a answerLatency) ObservePostIntent(ctx context.Context, p core.PostedMessage) error {
	if o, ok := a.next.(core.PostIntentObserver); ok {
		return o.ObservePostIntent(ctx, p)
	}
	return nil
}

func (m *opsMetrics) engineStats() engine.Stats {
	if m.engine == nil {
		return engine.Stats{}
	}
	return m.engine()
}

// RunEnded implements core.RunMetrics.
func (m *opsMetrics) RunEnded(st core.RunStatus) { m.runsEnded.WithLabelValues(string(st)).Inc() }

// ModelCalled implements core.RunMetrics.
func (m *opsMetrics) ModelCalled(elapsed time.Duration, u core.Usage, err error) {
	m.modelSecs.Observe(elapsed.Seconds())
	if u.InputTokens > 0 {
		m.modelTokens.WithLabelValues("input").Add(float64(u.InputTokens))
	}
	if u.OutputTokens > 0 {
		m.modelTokens.WithLabelValues("output").Add(float64(u.OutputTokens))
	}
	if err == nil {
		return
	}
	failure := "other"
	if me, ok := core.AsModelError(err); ok {
		failure = string(me.Failure)
	} else if errors.Is(err, context.Canceled) {
		failure = "cancelled" // shutdown or a cancel interrupted the call
	}
	m.modelErrors.WithLabelValues(failure).Inc()
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

// deliveryQueueCollector reads a surface's delivery retry queue at scrape
// time: what waits (from the database, so every replica reports the
// platform's whole queue) and this replica's counts of what it queued,
// redelivered, retried in vain and gave up.
type deliveryQueueCollector struct {
	platform string
	q        deliveryQueuer
}

var (
	deliveryQueuedDesc = prometheus.NewDesc("marlowe_delivery_queue_pending",
		"Inbound deliveries waiting in the durable retry queue, by platform (-1 when the queue cannot be read).", []string{"platform"}, nil)
	deliveryOldestDesc = prometheus.NewDesc("marlowe_delivery_queue_oldest_seconds",
		"Age of the oldest delivery waiting in the retry queue, by platform (0 when none).", []string{"platform"}, nil)
	deliveryRetriesDesc = prometheus.NewDesc("marlowe_delivery_retries_total",
		"Inbound deliveries this replica put on the retry queue (queued), took off it delivered (redelivered), retried in vain (failed) or gave up at the deadline (expired), by platform.",
		[]string{"platform", "outcome"}, nil)
)

func (c deliveryQueueCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- deliveryQueuedDesc
	ch <- deliveryOldestDesc
	ch <- deliveryRetriesDesc
}

func (c deliveryQueueCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	pending, oldest := -1.0, 0.0
	if b, err := c.q.DeliveryBacklog(ctx); err == nil {
		pending = float64(b.Queued)
		if b.Queued > 0 {
			oldest = time.Since(b.Oldest).Seconds()
		}
	}
	ch <- prometheus.MustNewConstMetric(deliveryQueuedDesc, prometheus.GaugeValue, pending, c.platform)
	ch <- prometheus.MustNewConstMetric(deliveryOldestDesc, prometheus.GaugeValue, oldest, c.platform)
	st := c.q.DeliveryRetryStats()
	for outcome, n := range map[string]uint64{"queued": st.Queued, "redelivered": st.Redelivered, "failed": st.Failed, "expired": st.Expired} {
		ch <- prometheus.MustNewConstMetric(deliveryRetriesDesc, prometheus.CounterValue, float64(n), c.platform, outcome)
	}
}
