package main

import (
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/adapters/slack/slackfake"
	"github.com/marlowe-bot/marlowe/internal/testpg"
	"github.com/marlowe-bot/marlowe/internal/testredis"
	"github.com/marlowe-bot/marlowe/llm/llmtest"
)

// BenchmarkReplicasAckAt200: Socket Mode acknowledgement latency at 200
// events/s (10% mentions delivered twice, as Slack does, 90% chatter over
// eight channels) through one and through three replicas of the built
// binary on Postgres and Redis. Opt in with MARLOWE_BENCH_REPLICAS=1; run
// with -benchtime 2000x (10 s) so the p99 means something.
func BenchmarkReplicasAckAt200(b *testing.B) {
	if os.Getenv("MARLOWE_BENCH_REPLICAS") != "1" {
		b.Skip("starts replicas of the built binary; set MARLOWE_BENCH_REPLICAS=1")
	}
	bin := buildCrashBot(b)
	for _, n := range []int{1, 3} {
		b.Run(fmt.Sprintf("replicas=%d", n), func(b *testing.B) { replicasAck(b, bin, n) })
	}
}

func replicasAck(b *testing.B, bin string, n int) {
	dbURL := testpg.New(b)
	rs := testredis.StartServer(b)
	sl := slackfake.New(slackfake.Config{RedeliverAfter: time.Minute})
	b.Cleanup(sl.Close)
	model := llmtest.NewOpenAIServer(b)
	key := "MARLOWE_SIGNING_KEY=" + testSigningKey(b)
	var reps []*replicaProc
	for i := range n {
		dir := b.TempDir()
		r := &replicaProc{t: b, bin: bin, name: fmt.Sprintf("r%d", i), logs: &syncBuffer{}, env: replicaEnv(dir, fmt.Sprintf("r%d", i), dbURL, rs.URL(), key, sl.APIURL(), model.URL, "MARLOWE_LOG_LEVEL=warn")}
		reps = append(reps, r)
		r.start()
		b.Cleanup(r.kill)
		for deadline := time.Now().Add(qaStartTimeout); sl.Connections() < i+1; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				b.Fatalf("replica %d never connected:\n%s", i, r.logs.String())
			}
		}
	}
	mention := "<@" + sl.Config().BotUserID + ">"
	chans := []string{"C0BENCH001", "C0BENCH002", "C0BENCH003", "C0BENCH004", "C0BENCH005", "C0BENCH006", "C0BENCH007", "C0BENCH008"}
	b.ResetTimer()
	start := time.Now()
	tick := time.NewTicker(time.Second / 200)
	defer tick.Stop()
	pushed := 0
	for i := range b.N {
		<-tick.C
		ch := chans[i%len(chans)]
		ts := fmt.Sprintf("1700000000.%06d", i)
		if i%10 == 0 {
			text := mention + " what's the status of the deploy?"
			sl.PushEvent(sl.AppMentionEvent(ch, qaAlice, text, ts, ""))
			sl.PushEvent(sl.MessageEvent(ch, qaAlice, text, ts, ""))
			pushed += 2
		} else {
			sl.PushEvent(sl.MessageEvent(ch, qaBob, "lunch anyone? the usual place at noon", ts, ""))
			pushed++
		}
	}
	for deadline := time.Now().Add(60 * time.Second); sl.AckCount() < pushed; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			b.Fatalf("acked %d of %d", sl.AckCount(), pushed)
		}
	}
	elapsed := time.Since(start)
	b.StopTimer()
	lat := make([]time.Duration, 0, pushed)
	for _, a := range sl.Acks() {
		lat = append(lat, a.Latency)
	}
	slices.Sort(lat)
	pct := func(p float64) float64 {
		return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))]) / float64(time.Millisecond)
	}
	b.ReportMetric(float64(pushed)/elapsed.Seconds(), "events/s")
	b.ReportMetric(pct(0.50), "p50-ack-ms")
	b.ReportMetric(pct(0.99), "p99-ack-ms")
}
