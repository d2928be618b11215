package main

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/engine"
)

// alertMetrics are the counters deploy/prometheus/alerts.yml alerts on
// beyond the run and model ones: journal append errors, lost channel
// leases and model failovers. All are present at 0 from the start, so a
// rate over them is defined before the first event.
type alertMetrics struct {
	appendErrors prometheus.Counter
	leasesLost   prometheus.Counter
	failovers    *prometheus.CounterVec
	// spend and tokens per channel (engine.SpendMetrics).
	spend  *prometheus.CounterVec
	tokens *prometheus.CounterVec
}

var (
	_ engine.OpsMetrics   = (*opsMetrics)(nil)
	_ engine.SpendMetrics = (*opsMetrics)(nil)
)

func newAlertMetrics() *alertMetrics {
	a := &alertMetrics{
		appendErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "marlowe_journal_append_errors_total",
			Help: "Journal appends that failed with an error (a moved head that was planned again is not one).",
		}),
		leasesLost: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "marlowe_channel_leases_lost_total",
			Help: "Channel leases this replica lost to another replica (many in a short time: leases flapping).",
		}),
		failovers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "marlowe_model_failovers_total",
			Help: "Model calls sent to the fallback model, by reason (the primary's failure, or breaker-open).",
		}, []string{"reason"}),
	}
	a.spend = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "marlowe_model_spend_total",
		Help: "Estimated model spend (MARLOWE_MODEL_PRICES, per million tokens, in its currency), by channel; calls to a model without a price add nothing.",
	}, []string{"channel"})
	a.tokens = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "marlowe_channel_tokens_total",
		Help: "Tokens the model reported using, by channel and kind (input, output).",
	}, []string{"channel", "kind"})
	a.failovers.WithLabelValues("breaker-open") // present at 0
	return a
}

func (a *alertMetrics) register(reg *prometheus.Registry) {
	reg.MustRegister(a.appendErrors, a.leasesLost, a.failovers, a.spend, a.tokens)
}

// failedOver is the model's failover hook.
func (a *alertMetrics) failedOver(reason string) { a.failovers.WithLabelValues(reason).Inc() }

// JournalAppendFailed implements engine.OpsMetrics.
func (m *opsMetrics) JournalAppendFailed() {
	if m.alerts != nil {
		m.alerts.appendErrors.Inc()
	}
}

// LeaseLost implements engine.OpsMetrics.
func (m *opsMetrics) LeaseLost() {
	if m.alerts != nil {
		m.alerts.leasesLost.Inc()
	}
}

// ModelSpent implements engine.SpendMetrics.
func (m *opsMetrics) ModelSpent(ch core.ChannelKey, _ string, u core.Usage, cost float64, priced bool) {
	if m.alerts == nil {
		return
	}
	a := m.alerts
	a.tokens.WithLabelValues(string(ch), "input").Add(float64(u.InputTokens))
	a.tokens.WithLabelValues(string(ch), "output").Add(float64(u.OutputTokens))
	if priced {
		a.spend.WithLabelValues(string(ch)).Add(cost)
	}
}
