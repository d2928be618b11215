package main

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/llm/llmtest"
)

// scrape GETs /metrics and returns each sample line's value by its name
// and labels as printed ("name{label=\"v\"}").
func scrape(t *testing.T, addr string) map[string]float64 {
	t.Helper()
	r, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	body, _ := io.ReadAll(r.Body)
	if r.StatusCode != http.StatusOK {
		t.Fatalf("metrics = %d %s", r.StatusCode, body)
	}
	out := map[string]float64{}
	for line := range strings.Lines(string(body)) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out
}

// TestMetricsMoveWithRuns scrapes /metrics of a running serve (Socket Mode
// against the fake Slack, the fake OpenAI-compatible model) before and
// after three runs: one answered through two injected 429s, one whose
// model call is refused (401), one parked on an approval card.
func TestMetricsMoveWithRuns(t *testing.T) {
	t.Parallel()
	b := startQA(t, qaOpts{})
	addr := b.readyAddr()
	before := scrape(t, addr)
	for _, k := range []string{
		`marlowe_runs_ended_total{status="done"}`, `marlowe_runs_ended_total{status="broken"}`,
		`marlowe_model_call_seconds_count`, `marlowe_approvals_pending`,
		`marlowe_outbound_rate_limited_total{platform="slack"}`, `marlowe_outbound_queued{platform="slack"}`,
		`marlowe_channels_owned`, `marlowe_draining`,
	} {
		if v, ok := before[k]; !ok || v != 0 {
			t.Errorf("before any run: %s = %v (present %v), want 0", k, v, ok)
		}
	}

	b.slack.RateLimit("chat.postMessage", 2, time.Second)
	b.model.Enqueue(llmtest.Text("metricskiwi answer"))
	b.slack.Say(qaGeneral, "", qaAlice, b.mention+" first question")
	b.waitPostFor(15*time.Second, "the answer despite 429s", hasText("metricskiwi answer"))
	b.waitLog("run completed")

	b.model.Enqueue(llmtest.Error(http.StatusUnauthorized, "bad key"))
	b.slack.Say(qaGeneral, "", qaAlice, b.mention+" second question")
	b.waitLog(`msg="run ended"`)

	b.model.Enqueue(llmtest.Tools(llmtest.Call("c1", "post_to_channel", `{"channel":"`+qaOther+`","text":"a note"}`)))
	b.slack.Say(qaGeneral, "", qaAlice, b.mention+" third question")
	b.waitPost("the approval card", isCard)

	after := scrape(t, addr)
	for k, want := range map[string]float64{
		`marlowe_runs_ended_total{status="done"}`:               1,
		`marlowe_runs_ended_total{status="broken"}`:             1,
		`marlowe_model_call_seconds_count`:                      3,
		`marlowe_model_errors_total{failure="auth"}`:            1,
		`marlowe_approvals_pending`:                             1,
		`marlowe_outbound_rate_limited_total{platform="slack"}`: 2,
		`marlowe_channels_owned`:                                1,
		`marlowe_draining`:                                      0,
	} {
		if got := after[k]; got != want {
			t.Errorf("after the runs: %s = %v, want %v", k, got, want)
		}
	}
	for _, k := range []string{`marlowe_model_tokens_total{kind="input"}`, `marlowe_model_tokens_total{kind="output"}`} {
		if after[k] <= 0 {
			t.Errorf("after the runs: %s = %v, want > 0", k, after[k])
		}
	}
	// Three mentions were delivered and acknowledged (Slack may send an
	// app_mention and a message envelope for each).
	if n := after[`marlowe_ack_seconds_count{platform="slack"}`]; n < 3 {
		t.Errorf("ack latency observations = %v, want at least 3", n)
	}
	// The answers' latency from the message's arrival, and the pacing
	// waits by method (issue 38).
	if n := after[`marlowe_answer_seconds_count{platform="slack"}`]; n < 1 {
		t.Errorf("answer latency observations = %v, want at least 1", n)
	}
	if n := after[`marlowe_pacing_wait_seconds_count{method="chat.postMessage",platform="slack"}`]; n < 1 {
		t.Errorf("chat.postMessage pacing waits observed = %v, want at least 1", n)
	}
	if _, ok := after[`marlowe_outbound_decorations_dropped_total{platform="slack"}`]; !ok {
		t.Errorf("marlowe_outbound_decorations_dropped_total{platform=\"slack\"} missing")
	}
	if t.Failed() {
		t.Logf("logs:\n%s", b.logs.String())
	}
}
