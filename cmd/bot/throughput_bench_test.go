package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/adapters/slack/slackfake"
	"github.com/marlowe-bot/marlowe/internal/testpg"
	"github.com/marlowe-bot/marlowe/internal/testredis"
	"github.com/marlowe-bot/marlowe/llm/llmtest"
)

// BenchmarkThroughput drives the bot with the load of issue 26: the fake
// Slack over Socket Mode, a fake model that answers at once, events at a
// fixed rate, 90% chatter and 10% mentions (each as Slack's app_mention +
// message pair), the mentions spread over many channels so that the
// per-channel post pacing is never the limit. One op is one event pushed.
// It reports the push rate, ack p50/p99/max, answer p50/p99 (a mention's
// push to its answer's post), the share of mentions answered, the runs
// completed per second (answers over first event to last answer) and the
// drain: the time from the last event to the last answer.
//
// By default the composition root runs in process (serve, as `bot serve`
// runs it), so -cpuprofile, -mutexprofile and -blockprofile see the bot:
//
//	go test -run '^$' -bench Throughput -benchtime 10000x ./cmd/bot/
//
// MARLOWE_BENCH_REPLICAS=n runs n replicas of the built binary instead
// (on Postgres and a Redis of their own; with store=sqlite only n=1), as a
// user runs it. With MARLOWE_BENCH_KILL=1 as well, the first replica is
// killed (SIGKILL) halfway through the load and started again at once:
// the fake Slack redelivers what it had not acknowledged after 5 s, and
// the benchmark fails unless every mention is answered, none twice. MARLOWE_BENCH_RATE (events/s, default 1000),
// MARLOWE_BENCH_CHANNELS (default 200) and MARLOWE_BENCH_MENTION_PCT (the
// mentions' share of events, default 10) change the shape;
// MARLOWE_BENCH_STORE=sqlite|postgres runs one store only;
// MARLOWE_BENCH_TRACES=1 traces every run (OTLP/HTTP to a receiver in the
// benchmark) to compare cpu-ms/run with tracing on and off.
func BenchmarkThroughput(b *testing.B) {
	replicas := benchEnvInt("MARLOWE_BENCH_REPLICAS", 0)
	for _, store := range []string{"sqlite", "postgres"} {
		if only := os.Getenv("MARLOWE_BENCH_STORE"); only != "" && only != store {
			continue
		}
		if store == "sqlite" && replicas > 1 {
			continue // replicas share a Postgres
		}
		name := "store=" + store
		if replicas > 0 {
			name += fmt.Sprintf("/replicas=%d", replicas)
		}
		b.Run(name, func(b *testing.B) {
			dbURL := ""
			if store == "postgres" {
				dbURL = testpg.New(b)
			}
			throughput(b, dbURL, replicas)
		})
	}
}

func benchEnvInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// benchBots starts the bots under load: serve in process (replicas 0), or
// that many replicas of the built binary. It returns their logs, and a
// func that kills the first replica and starts it again (nil in process).
func benchBots(b *testing.B, sl *slackfake.Server, modelURL, dbURL string, replicas int) (logs func() string, restart func()) {
	if replicas == 0 {
		vars := map[string]string{
			"MARLOWE_DATA_DIR":          b.TempDir(),
			"MARLOWE_HTTP_ADDR":         "127.0.0.1:0",
			"MARLOWE_DATABASE_URL":      dbURL,
			"SLACK_BOT_TOKEN":           "xoxb-bench",
			"SLACK_APP_TOKEN":           "xapp-bench",
			"MARLOWE_SLACK_API_URL":     sl.APIURL(),
			"MARLOWE_MODEL_PROVIDER":    "openai",
			"MARLOWE_MODEL":             "fake",
			"MARLOWE_MODEL_BASE_URL":    modelURL,
			"MARLOWE_MODEL_MAX_RETRIES": "0",
			"MARLOWE_LOG_LEVEL":         envOr("MARLOWE_BENCH_LOG", "warn"),
		}
		if os.Getenv("MARLOWE_BENCH_TRACES") == "1" {
			vars["OTEL_EXPORTER_OTLP_ENDPOINT"] = benchOTLP(b) // every run traced, exported over OTLP/HTTP
		}
		logs := serveBench(b, vars)
		if !sl.WaitConnected(qaStartTimeout) {
			b.Fatalf("the bot never connected:\n%s", logs.String())
		}
		return logs.String, nil
	}
	bin := buildCrashBot(b)
	redisURL := ""
	if dbURL != "" {
		redisURL = testredis.StartServer(b).URL()
	}
	key := "MARLOWE_SIGNING_KEY=" + testSigningKey(b)
	var reps []*replicaProc
	for i := range replicas {
		name := fmt.Sprintf("r%d", i)
		r := &replicaProc{t: b, bin: bin, name: name, logs: &syncBuffer{},
			env: replicaEnv(b.TempDir(), name, dbURL, redisURL, key, sl.APIURL(), modelURL,
				"MARLOWE_LOG_LEVEL="+envOr("MARLOWE_BENCH_LOG", "warn"),
				"MARLOWE_DATABASE_URL="+dbURL)} // production pool sizes: this measures throughput
		reps = append(reps, r)
		r.start()
		b.Cleanup(r.stop)
		for deadline := time.Now().Add(qaStartTimeout); sl.Connections() < i+1; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				b.Fatalf("replica %d never connected:\n%s", i, r.logs.String())
			}
		}
	}
	return func() string { return dumpLogs(reps) }, func() { reps[0].kill(); reps[0].start() }
}

// serveBench runs `bot serve` in process with vars until the benchmark
// ends, and returns its logs.
func serveBench(b *testing.B, vars map[string]string) *syncBuffer {
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
	return logs
}

func throughput(b *testing.B, dbURL string, replicas int) {
	rate := benchEnvInt("MARLOWE_BENCH_RATE", 1000)
	nch := benchEnvInt("MARLOWE_BENCH_CHANNELS", 200)
	every := max(1, 100/min(100, benchEnvInt("MARLOWE_BENCH_MENTION_PCT", 10)))
	kill := replicas > 0 && os.Getenv("MARLOWE_BENCH_KILL") == "1"
	redeliver := time.Minute
	if kill {
		redeliver = 5 * time.Second
	}
	sl := slackfake.New(slackfake.Config{
		RedeliverAfter: redeliver,
		Users:          []slackfake.User{{ID: qaAlice, Name: "alice"}, {ID: qaBob, Name: "bob"}},
	})
	b.Cleanup(sl.Close)
	model := llmtest.NewOpenAIServer(b)
	logs, restart := benchBots(b, sl, model.URL, dbURL, replicas)
	chans := make([]string, nch)
	for i := range chans {
		chans[i] = fmt.Sprintf("C0TP%06d", i)
	}
	mention := "<@" + sl.Config().BotUserID + ">"

	b.ResetTimer()
	cpu := processCPU()
	// Push in 10 ms slices (a 1 ms ticker is not kept on a loaded machine):
	// event i is due at start + i/rate.
	start := time.Now()
	var asked []time.Time // mention n pushed at asked[n]
	for i := 0; i < b.N; {
		due := start.Add(time.Duration(i) * time.Second / time.Duration(rate))
		if d := time.Until(due); d > 0 {
			time.Sleep(d)
		}
		for ; i < b.N && !time.Now().Before(start.Add(time.Duration(i)*time.Second/time.Duration(rate))); i++ {
			if kill && i == b.N/2 {
				restart()
			}
			ts := fmt.Sprintf("1700000000.%06d", i)
			if i%every == 0 {
				n := len(asked)
				ch := chans[n%len(chans)]
				text := fmt.Sprintf("%s please echo tp%06d", mention, n)
				// Stored, as Slack has it: a resumed post looks its thread up.
				ts := sl.AddMessage(ch, "", qaAlice, text)
				asked = append(asked, time.Now())
				sl.PushEvent(sl.AppMentionEvent(ch, qaAlice, text, ts, ""))
				sl.PushEvent(sl.MessageEvent(ch, qaAlice, text, ts, ""))
			} else {
				ch := chans[(i*7)%len(chans)]
				sl.PushEvent(sl.MessageEvent(ch, qaBob, "lunch anyone? the usual place at noon", ts, ""))
			}
		}
	}
	lastEvent := time.Now()
	pushSecs := lastEvent.Sub(start).Seconds()
	mentions := len(asked)

	// Wait for every mention's answer ("You said: … tpNNNNNN").
	answered := map[int]time.Time{}
	seen, doubled := 0, 0
	drainLimit := time.Duration(benchEnvInt("MARLOWE_BENCH_DRAIN_S", 120)) * time.Second
	for deadline := time.Now().Add(drainLimit); len(answered) < mentions && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		posts := sl.Posts()
		for _, p := range posts[seen:] {
			if !strings.Contains(p.Text, "You said:") {
				continue
			}
			if k := strings.Index(p.Text, "echo tp"); k >= 0 && len(p.Text) >= k+13 {
				if n, err := strconv.Atoi(p.Text[k+7 : k+13]); err == nil {
					if _, dup := answered[n]; dup {
						doubled++
					} else {
						answered[n] = p.At
					}
				}
			}
		}
		seen = len(posts)
	}
	b.StopTimer()
	// Calls may go on after the last answer (reactions, status, edits):
	// wait until none has come for 2 s, at most 60 s.
	for n, quiet, end := len(sl.Calls()), time.Now(), time.Now().Add(time.Minute); time.Since(quiet) < 2*time.Second && time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if m := len(sl.Calls()); m != n {
			n, quiet = m, time.Now()
		}
	}
	var last time.Time
	var answer []time.Duration
	for n, at := range answered {
		if at.After(last) {
			last = at
		}
		if n < len(asked) {
			answer = append(answer, at.Sub(asked[n]))
		}
	}
	var ack []time.Duration
	for _, a := range sl.Acks() {
		ack = append(ack, a.Latency)
	}
	b.ReportMetric(float64(b.N)/pushSecs, "events/s")
	b.ReportMetric(quantileMS(ack, 0.50), "p50-ack-ms")
	b.ReportMetric(quantileMS(ack, 0.99), "p99-ack-ms")
	b.ReportMetric(quantileMS(ack, 1), "max-ack-ms")
	b.ReportMetric(quantileMS(answer, 0.50), "p50-answer-ms")
	b.ReportMetric(quantileMS(answer, 0.99), "p99-answer-ms")
	b.ReportMetric(quantileMS(answer, 1), "max-answer-ms")
	b.ReportMetric(float64(len(answered))/float64(max(1, mentions)), "answered")
	if len(answered) > 0 {
		// The whole process's CPU (bot, fake Slack, fake model) per answered
		// run; MARLOWE_BENCH_TRACES=1 against none shows what tracing costs.
		b.ReportMetric(float64((processCPU()-cpu).Microseconds())/1000/float64(len(answered)), "cpu-ms/run")
		b.ReportMetric(float64(len(answered))/last.Sub(start).Seconds(), "runs/s")
		b.ReportMetric(last.Sub(lastEvent).Seconds(), "drain-s")
	}
	// Per method: the calls the fake Slack answered, and the last one of
	// any kind after the last event (the pacing's drain).
	byMethod := map[string]int{}
	var lastCall time.Time
	for _, c := range sl.Calls() {
		byMethod[c.Method]++
		if c.At.After(lastCall) {
			lastCall = c.At
		}
	}
	b.Logf("Web API calls by method: %v", byMethod)
	b.ReportMetric(lastCall.Sub(lastEvent).Seconds(), "last-call-s")
	if doubled > 0 {
		b.Errorf("%d answers were posted twice", doubled)
	}
	if kill && len(answered) < mentions {
		b.Errorf("a replica was killed: %d of %d mentions answered", len(answered), mentions)
	}
	if len(answered) < mentions {
		b.Logf("%d of %d mentions answered within %s of the last event", len(answered), mentions, drainLimit)
	}
	if os.Getenv("MARLOWE_BENCH_LOG") != "" {
		f := filepath.Join(os.TempDir(), "marlowe-throughput-bots.log")
		if err := os.WriteFile(f, []byte(logs()), 0o600); err == nil {
			b.Logf("the bots' logs: %s", f)
		}
	}
}

// quantileMS is the q quantile of d in milliseconds (1 = the maximum; 0
// for no samples). It sorts d.
func quantileMS(d []time.Duration, q float64) float64 {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	return float64(d[min(len(d)-1, int(q*float64(len(d))))]) / float64(time.Millisecond)
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
