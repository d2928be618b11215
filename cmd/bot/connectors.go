package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/marlowe-bot/marlowe/connectors"
	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/internal/telemetry"
)

// loadConnectors reads MARLOWE_MCP_CONFIG; nil when it is unset. An error
// (a file that does not parse, a server with neither command nor url, an
// unset ${VAR}) names the file, the server and the field, and stops serve.
func loadConnectors(getenv func(string) string) (*connectors.Config, error) {
	file := getenv("MARLOWE_MCP_CONFIG")
	if file == "" {
		return nil, nil
	}
	cfg, err := connectors.LoadFile(file, getenv)
	if err != nil {
		return nil, fmt.Errorf("MARLOWE_MCP_CONFIG: %w", err)
	}
	return cfg, nil
}

// connectorMetrics counts calls, errors and latency per server and tool.
type connectorMetrics struct {
	calls   *prometheus.CounterVec
	errors  *prometheus.CounterVec
	latency *prometheus.HistogramVec
}

func newConnectorMetrics() *connectorMetrics {
	return &connectorMetrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "marlowe_connector_calls_total", Help: "Connector (MCP) tool calls, by server, tool and outcome.",
		}, []string{"server", "tool", "outcome"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "marlowe_connector_errors_total", Help: "Connector (MCP) tool calls that did not succeed, by server and tool.",
		}, []string{"server", "tool"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "marlowe_connector_call_seconds", Help: "Connector (MCP) tool call latency, by server and tool.",
			Buckets: []float64{.005, .01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300},
		}, []string{"server", "tool"}),
	}
}

func (m *connectorMetrics) observe(server, tool string, took time.Duration, outcome string) {
	m.calls.WithLabelValues(server, tool, outcome).Inc()
	if outcome != "ok" {
		m.errors.WithLabelValues(server, tool).Inc()
	}
	m.latency.WithLabelValues(server, tool).Observe(took.Seconds())
}

func (m *connectorMetrics) register(reg *prometheus.Registry) {
	reg.MustRegister(m.calls, m.errors, m.latency)
}

// startConnectors starts every configured server in the background: a
// slow or broken one never holds up serve or the others.
func startConnectors(ctx context.Context, cfg *connectors.Config, cm *connectorMetrics, si *signIn, tracing *telemetry.Tracing, log *slog.Logger) *connectors.Manager {
	for _, w := range cfg.Warnings {
		log.Warn("connector configuration", "warning", w)
	}
	opts := connectorOptions(tracing)
	opts.Logger, opts.Observe, opts.Tokens, opts.Rejected = log.With("component", "connectors"), cm.observe, si.tokens(), si.rejected()
	m := connectors.New(cfg, opts)
	m.Start(ctx)
	log.Info("connectors starting", "file", cfg.File, "servers", len(cfg.Servers))
	return m
}

// connectorsCheck shows each server's state on /readyz. It never fails
// readiness: a broken server costs its own tools, not the bot.
func connectorsCheck(m *connectors.Manager) readyCheck {
	return readyCheck{name: "connectors", status: func(context.Context) (string, error) {
		var parts []string
		for _, s := range m.States() {
			p := fmt.Sprintf("%s %s %s", s.Name, s.Transport, s.Status)
			switch s.Status {
			case "ready":
				p += fmt.Sprintf(" %d tools", s.Tools)
			case "down":
				p += ": " + core.Truncate(s.Err, 200)
			}
			parts = append(parts, p)
		}
		if len(parts) == 0 {
			return "none configured", nil
		}
		return strings.Join(parts, "; "), nil
	}}
}

// doctorConnectors checks MARLOWE_MCP_CONFIG and starts each server once:
// name, transport and tool count, or the error with the server's last
// stderr lines.
func doctorConnectors(ctx context.Context, d *doctor, getenv func(string) string) {
	cfg, err := loadConnectors(getenv)
	if err != nil {
		d.add(fail("connectors", err.Error(), "correct the field named above in the file (docs/connectors.md)"))
		return
	}
	if cfg == nil {
		return
	}
	for _, w := range cfg.Warnings {
		d.add(warn("connectors", w, "remove the field or check its spelling: Marlowe ignores it"))
	}
	m := connectors.New(cfg, connectors.Options{})
	m.Start(ctx)
	defer m.Close()
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	_ = m.WaitReady(wctx)
	cancel()
	for _, s := range m.States() {
		name := "connector " + s.Name
		switch s.Status {
		case "disabled":
			d.add(ok(name, "disabled in the file"))
		case "ready":
			d.add(ok(name, fmt.Sprintf("%s, %d tools", s.Transport, s.Tools)))
			if len(s.RoomHints) > 0 {
				d.add(warn(name, "tools that take a chat room, not under \"rooms\": "+strings.Join(s.RoomHints, ", "),
					"if one names a room of this bot's chat platform, add \"rooms\": {\"<tool>\": \"<argument>\"} to the server so the requester must be able to read that room (docs/connectors.md)"))
			}
		case "sign-in":
			// Acts as each person: no shared session; the sign-in line checks its discovery.
			d.add(ok(name, s.Transport+", acts as each person: tools are listed once someone signs in"))
		case "starting":
			d.add(fail(name, s.Transport+": no answer within 30s", "check the command or URL; a server that needs a download (npx) may be slow the first time"))
		default:
			detail := s.Transport + ": " + s.Err
			if len(s.Stderr) > 0 {
				last := s.Stderr[max(0, len(s.Stderr)-5):]
				detail += " | stderr: " + strings.Join(last, " | ")
			}
			d.add(fail(name, detail, "run the server's command by hand with the same env to see why it fails; check its ${VAR} values in .env"))
		}
	}
}
