package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/adapters/slack/slackfake"
	"github.com/marlowe-bot/marlowe/internal/testpg"
	"github.com/marlowe-bot/marlowe/llm/llmtest"
)

// BenchmarkThroughput drives the composition root in process (serve, as
// `bot serve` runs it) with the load of issue 26: the fake Slack over
// Socket Mode, a fake model that answers at once, events at a fixed rate,
// 90% chatter and 10% mentions (each as Slack's app_mention + message
// pair), the mentions spread over many channels so that the per-channel
// post pacing is never the limit. One op is one event pushed. It reports
// the push rate, ack p50/p99, the share of mentions answered, the runs
// completed per second (answers over first event to last answer) and the
// drain: the time from the last event to the last answer.
//
// In process, so -cpuprofile, -mutexprofile and -blockprofile see the bot:
//
//	go test -run '^$' -bench Throughput -benchtime 10000x ./cmd/bot/
//
// MARLOWE_BENCH_RATE (events/s, default 1000) and MARLOWE_BENCH_CHANNELS
// (default 200) change the shape; MARLOWE_BENCH_STORE=sqlite|postgres runs
// one store only.
func BenchmarkThroughput(b *testing.B) {
	for _, store := range []string{"sqlite", "postgres"} {
		if only := os.Getenv("MARLOWE_BENCH_STORE"); only != "" && only != store {
			continue
		}
		b.Run("store="+store, func(b *testing.B) {
			dbURL := ""
			if store == "postgres" {
				dbURL = testpg.New(b)
			}
			throughput(b, dbURL)
		})
	}
}

func benchEnvInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func throughput(b *testing.B, dbURL string) {
	rate := benchEnvInt("MARLOWE_BENCH_RATE", 1000)
	nch := benchEnvInt("MARLOWE_BENCH_CHANNELS", 200)
	sl := slackfake.New(slackfake.Config{
		RedeliverAfter: time.Minute,
		Users:          []slackfake.User{{ID: qaAlice, Name: "alice"}, {ID: qaBob, Name: "bob"}},
	})
	b.Cleanup(sl.Close)
	model := llmtest.NewOpenAIServer(b)
	dir := b.TempDir()
	vars := map[string]string{
		"MARLOWE_DATA_DIR":          dir,
		"MARLOWE_HTTP_ADDR":         "127.0.0.1:0",
		"MARLOWE_DATABASE_URL":      dbURL,
		"SLACK_BOT_TOKEN":           "xoxb-bench",
		"SLACK_APP_TOKEN":           "xapp-bench",
		"MARLOWE_SLACK_API_URL":     sl.APIURL(),
		"MARLOWE_MODEL_PROVIDER":    "openai",
		"MARLOWE_MODEL":             "fake",
		"MARLOWE_MODEL_BASE_URL":    model.URL,
		"MARLOWE_MODEL_MAX_RETRIES": "0",
		"MARLOWE_LOG_LEVEL":         envOr("MARLOWE_BENCH_LOG", "warn"),
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	logs := &syncBuffer{}
	go func() { done <- run(ctx, []string{"serve"}, env(vars), strings.NewReader(""), io.Discard, logs) }()
	b.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			b.Errorf("serve did not stop")
		}
	})
	if !sl.WaitConnected(qaStartTimeout) {
		b.Fatalf("the bot never connected:\n%s", logs.String())
	}
	chans := make([]string, nch)
	for i := range chans {
		chans[i] = fmt.Sprintf("C0TP%06d", i)
	}
	mention := "<@" + sl.Config().BotUserID + ">"

	b.ResetTimer()
	// Push in 10 ms slices (a 1 ms ticker is not kept on a loaded machine):
	// event i is due at start + i/rate.
	start := time.Now()
	pushed, mentions := 0, 0
	for i := 0; i < b.N; {
		due := start.Add(time.Duration(i) * time.Second / time.Duration(rate))
		if d := time.Until(due); d > 0 {
			time.Sleep(d)
		}
		for ; i < b.N && !time.Now().Before(start.Add(time.Duration(i)*time.Second/time.Duration(rate))); i++ {
			ts := fmt.Sprintf("1700000000.%06d", i)
			if i%10 == 0 {
				ch := chans[mentions%len(chans)]
				text := fmt.Sprintf("%s please echo tp%06d", mention, mentions)
				// Stored, as Slack has it: a resumed post looks its thread up.
				ts := sl.AddMessage(ch, "", qaAlice, text)
				sl.PushEvent(sl.AppMentionEvent(ch, qaAlice, text, ts, ""))
				sl.PushEvent(sl.MessageEvent(ch, qaAlice, text, ts, ""))
				pushed += 2
				mentions++
			} else {
				ch := chans[(i*7)%len(chans)]
				sl.PushEvent(sl.MessageEvent(ch, qaBob, "lunch anyone? the usual place at noon", ts, ""))
				pushed++
			}
		}
	}
	lastEvent := time.Now()
	pushSecs := lastEvent.Sub(start).Seconds()

	// Wait for every mention's answer ("You said: … tpNNNNNN").
	answered := map[string]time.Time{}
	seen := 0
	drainLimit := time.Duration(benchEnvInt("MARLOWE_BENCH_DRAIN_S", 120)) * time.Second
	for deadline := time.Now().Add(drainLimit); len(answered) < mentions && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		posts := sl.Posts()
		for _, p := range posts[seen:] {
			if !strings.Contains(p.Text, "You said:") {
				continue
			}
			if k := strings.Index(p.Text, "echo tp"); k >= 0 && len(p.Text) >= k+13 {
				answered[p.Text[k+5:k+13]] = p.At
			}
		}
		seen = len(posts)
	}
	b.StopTimer()
	var last time.Time
	for _, at := range answered {
		if at.After(last) {
			last = at
		}
	}
	var lat []time.Duration
	for _, a := range sl.Acks() {
		lat = append(lat, a.Latency)
	}
	slices.Sort(lat)
	pct := func(p float64) float64 {
		if len(lat) == 0 {
			return 0
		}
		return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))]) / float64(time.Millisecond)
	}
	b.ReportMetric(float64(b.N)/pushSecs, "events/s")
	b.ReportMetric(pct(0.50), "p50-ack-ms")
	b.ReportMetric(pct(0.99), "p99-ack-ms")
	b.ReportMetric(float64(len(answered))/float64(max(1, mentions)), "answered")
	if len(answered) > 0 {
		b.ReportMetric(float64(len(answered))/last.Sub(start).Seconds(), "runs/s")
		b.ReportMetric(last.Sub(lastEvent).Seconds(), "drain-s")
	}
	if len(answered) < mentions {
		b.Logf("%d of %d mentions answered within %s of the last event", len(answered), mentions, drainLimit)
		if os.Getenv("MARLOWE_BENCH_LOG") != "" {
			b.Log(logs.String())
		}
	}
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
