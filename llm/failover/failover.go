// Package failover is a core.Model that asks a primary model and, when the
// primary fails, a secondary one with the same view. The view is the whole
// state of a run's step, so nothing is lost by switching providers mid-run.
//
// Policy:
//   - A transient failure of the primary (rate-limited, unavailable, timeout,
//     bad response) fails over.
//   - An auth failure of the primary (401/403: a configuration problem) fails
//     over too, so the bot stays up, and is logged at error level.
//   - A bad request (400) fails over as well — another provider may accept what
//     this one refused (context length, schema dialect) — but does not count
//     against the primary's health.
//   - A cancelled or expired context, or an error that is not a
//     *core.ModelError, is returned as is: there is nothing to fail over from.
//
// A circuit breaker keeps a sick primary from costing every call a timeout:
// after Threshold consecutive health failures (transient or auth) the primary
// is skipped for Cooldown; the first call after the cool-down tries it again
// (half-open), and one more failure opens the breaker again.
package failover

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/marlowe-bot/marlowe/core"
)

// Defaults for the circuit breaker.
const (
	DefaultThreshold = 3
	DefaultCooldown  = 30 * time.Second
)

// Option configures a Model.
type Option func(*Model)

// WithThreshold sets how many consecutive failures open the breaker (>= 1).
func WithThreshold(n int) Option {
	return func(m *Model) {
		if n >= 1 {
			m.threshold = n
		}
	}
}

// WithCooldown sets how long an open breaker skips the primary.
func WithCooldown(d time.Duration) Option {
	return func(m *Model) {
		if d > 0 {
			m.cooldown = d
		}
	}
}

// WithClock injects the clock the breaker reads.
func WithClock(now func() time.Time) Option {
	return func(m *Model) {
		if now != nil {
			m.now = now
		}
	}
}

// WithLogger sets the logger; default slog.Default().
func WithLogger(l *slog.Logger) Option {
	return func(m *Model) {
		if l != nil {
			m.log = l
		}
	}
}

// WithNames sets the labels used in logs for the two models (default
// "primary" and "secondary").
func WithNames(primary, secondary string) Option {
	return func(m *Model) {
		m.names = [2]string{primary, secondary}
	}
}

// WithOnFailover sets a function told each time a call goes to the
// secondary (a metric counts them; it must not block).
func WithOnFailover(f func(reason string)) Option {
	return func(m *Model) { m.onFailover = f }
}

// Model is the failover core.Model. It is safe for concurrent use.
type Model struct {
	primary, secondary core.Model
	threshold          int
	cooldown           time.Duration
	now                func() time.Time
	log                *slog.Logger
	names              [2]string
	onFailover         func(reason string)

	mu        sync.Mutex
	failures  int       // consecutive health failures of the primary
	openUntil time.Time // primary skipped before this instant
}

var _ core.Model = (*Model)(nil)

// New returns a Model over primary and secondary. A nil secondary makes it a
// plain pass-through to the primary.
func New(primary, secondary core.Model, opts ...Option) *Model {
	m := &Model{
		primary:   primary,
		secondary: secondary,
		threshold: DefaultThreshold,
		cooldown:  DefaultCooldown,
		now:       time.Now,
		log:       slog.Default(),
		names:     [2]string{"primary", "secondary"},
	}
	for _, o := range opts {
		o(m)
	}
	return m
}

// Step asks the primary, unless its breaker is open, and fails over to the
// secondary as the package documentation describes. Reply.Provider names the
// provider that answered.
func (m *Model) Step(ctx context.Context, v core.View) (core.Reply, error) {
	return m.call(ctx, func(p core.Model) (core.Reply, error) { return p.Step(ctx, v) })
}

var _ core.StreamingModel = (*Model)(nil)

// StepStream implements core.StreamingModel: the provider that answers
// streams (one that cannot stream answers whole). A failover after some
// text was shown starts the text again: text is the text so far, so the
// secondary's replaces the primary's.
func (m *Model) StepStream(ctx context.Context, v core.View, text func(string, bool)) (core.Reply, error) {
	return m.call(ctx, func(p core.Model) (core.Reply, error) {
		if sp, ok := p.(core.StreamingModel); ok {
			return sp.StepStream(ctx, v, text)
		}
		return p.Step(ctx, v)
	})
}

// call asks the primary through step and, on a model failure, the
// secondary, keeping the breaker.
func (m *Model) call(ctx context.Context, step func(core.Model) (core.Reply, error)) (core.Reply, error) {
	if m.secondary == nil {
		return step(m.primary)
	}
	if until, open := m.open(); open {
		m.log.DebugContext(ctx, "model failover: primary skipped, breaker open",
			"primary", m.names[0], "secondary", m.names[1], "until", until)
		m.failedOver(ctx, "breaker-open")
		return step(m.secondary)
	}

	r, err := step(m.primary)
	if err == nil {
		m.succeeded(ctx)
		return r, nil
	}
	me, ok := core.AsModelError(err)
	if !ok || ctx.Err() != nil {
		return core.Reply{}, err
	}
	m.failed(ctx, me)
	m.failedOver(ctx, string(me.Failure))

	r, err2 := step(m.secondary)
	if err2 == nil {
		return r, nil
	}
	return core.Reply{}, combine(me, err2)
}

// Open reports whether the breaker is open (the primary is being skipped).
func (m *Model) Open() bool {
	_, open := m.open()
	return open
}

func (m *Model) open() (time.Time, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.openUntil, m.now().Before(m.openUntil)
}

func (m *Model) succeeded(ctx context.Context) {
	m.mu.Lock()
	recovered := m.failures >= m.threshold
	m.failures = 0
	m.openUntil = time.Time{}
	m.mu.Unlock()
	if recovered {
		m.log.InfoContext(ctx, "model failover: primary recovered, breaker closed", "primary", m.names[0])
	}
}

func (m *Model) failed(ctx context.Context, me *core.ModelError) {
	attrs := []any{
		"primary", m.names[0], "secondary", m.names[1],
		"provider", me.Provider, "failure", string(me.Failure), "err", me.Err,
	}
	health := me.Transient() || me.Failure == core.FailAuth
	if !health {
		m.log.WarnContext(ctx, "model failover: primary refused the request, trying secondary", attrs...)
		return
	}
	if me.Failure == core.FailAuth {
		m.log.ErrorContext(ctx, "model failover: primary auth failed (check its API key and configuration), trying secondary", attrs...)
	} else {
		m.log.WarnContext(ctx, "model failover: primary failed, trying secondary", attrs...)
	}
	m.mu.Lock()
	m.failures++
	opened := m.failures >= m.threshold
	if opened {
		m.openUntil = m.now().Add(m.cooldown)
	}
	n, until := m.failures, m.openUntil
	m.mu.Unlock()
	if opened {
		m.log.WarnContext(ctx, "model failover: breaker open, skipping primary",
			"primary", m.names[0], "consecutive_failures", n, "until", until)
	}
}

// combine reports a failure of both models as one *core.ModelError. Its kind
// is the more hopeful of the two — transient when either is — so the run
// loop waits and retries rather than giving up while one provider may come
// back; both errors stay in the chain.
func combine(primary *core.ModelError, secondaryErr error) error {
	sec, ok := core.AsModelError(secondaryErr)
	if !ok {
		// Cancelled while the secondary ran, or an unclassified error.
		return errors.Join(secondaryErr, primary)
	}
	chosen := sec
	if !sec.Transient() && primary.Transient() {
		chosen = primary
	}
	return &core.ModelError{
		Provider:   chosen.Provider,
		Failure:    chosen.Failure,
		RetryAfter: chosen.RetryAfter,
		Err:        errors.Join(sec, primary),
	}
}

// failedOver counts a call sent to the secondary and notes on the caller's
// span (the engine's model call span, when traced) that it was, and why.
func (m *Model) failedOver(ctx context.Context, why string) {
	if m.onFailover != nil {
		m.onFailover(why)
	}
	names := m.names
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(attribute.Bool("marlowe.model.failover", true))
	span.AddEvent("marlowe.model.failover", trace.WithAttributes(
		attribute.String("marlowe.model.primary", names[0]),
		attribute.String("marlowe.model.secondary", names[1]),
		attribute.String("marlowe.model.failover_reason", why)))
}
