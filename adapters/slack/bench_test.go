package slack

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slack-go/slack/slackevents"

	"github.com/marlowe-bot/marlowe/adapters/slack/slackfake"
	"github.com/marlowe-bot/marlowe/core"
)

// BenchmarkSocketReceive measures receive → dedupe → normalise → deliver →
// ack through the real socketmode client against the fake over loopback.
// 90% of messages are ignorable chatter; every 10th mentions the bot and so
// arrives twice (app_mention + message). deliver is a trivial filter. At most
// 256 envelopes are unacknowledged at a time (a busy workspace, not a flood).
// Reports events/s and the ack latency (envelope sent → ack received).
func BenchmarkSocketReceive(b *testing.B) { socketReceive(b, 0) }

// BenchmarkSocketReceiveAt200 offers the same load paced at 200 events/s,
// the operating point for ack latency: run it with -benchtime
// 2000x (10 s) or more so the p99 means something.
func BenchmarkSocketReceiveAt200(b *testing.B) { socketReceive(b, 200) }

// socketReceive pushes b.N events (10% mentions delivered twice, 90%
// chatter) as fast as acks allow, or at rate events/s when rate > 0.
func socketReceive(b *testing.B, rate int) {
	f := newFake(b, func(c *slackfake.Config) { c.RedeliverAfter = time.Minute })
	a, _ := newAdapter(b, testConfig(f, ModeSocket))
	var routed, ignored atomic.Int64
	deliver := func(ctx context.Context, in core.Inbound) error {
		if in.Event != nil && (in.Event.MentionsBot || in.Event.Visibility == core.DM) && in.Event.Subtype == "" && !in.Event.Author.IsBot {
			routed.Add(1)
		} else {
			ignored.Add(1)
		}
		return nil
	}
	run(b, a, deliver)
	if !f.WaitConnected(5 * time.Second) {
		b.Fatal("no connection")
	}
	mention := botMention(f)
	chans := []string{chPublic, chGroup, chPrivate, "C0BENCH001", "C0BENCH002", "C0BENCH003", "C0BENCH004", "C0BENCH005"}
	const window = 256

	b.ResetTimer()
	start := time.Now()
	pushed := 0
	var tick *time.Ticker
	if rate > 0 {
		tick = time.NewTicker(time.Second / time.Duration(rate))
		defer tick.Stop()
	}
	for i := range b.N {
		if tick != nil {
			<-tick.C
		}
		for pushed-f.AckCount() >= window {
			time.Sleep(50 * time.Microsecond)
		}
		ch := chans[i%len(chans)]
		ts := fmt.Sprintf("1700000000.%06d", i)
		if i%10 == 0 {
			text := mention + " what's the status of the deploy?"
			f.PushEvent(f.AppMentionEvent(ch, alice, text, ts, ""))
			f.PushEvent(f.MessageEvent(ch, alice, text, ts, ""))
			pushed += 2
		} else {
			f.PushEvent(f.MessageEvent(ch, bob, "lunch anyone? the usual place at noon", ts, ""))
			pushed++
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for f.AckCount() < pushed {
		if time.Now().After(deadline) {
			b.Fatalf("acked %d of %d", f.AckCount(), pushed)
		}
		time.Sleep(100 * time.Microsecond)
	}
	elapsed := time.Since(start)
	b.StopTimer()

	lat := make([]time.Duration, 0, pushed)
	for _, ack := range f.Acks() {
		lat = append(lat, ack.Latency)
	}
	slices.Sort(lat)
	pct := func(p float64) float64 {
		return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))]) / float64(time.Millisecond)
	}
	b.ReportMetric(float64(pushed)/elapsed.Seconds(), "events/s")
	b.ReportMetric(pct(0.50), "p50-ack-ms")
	b.ReportMetric(pct(0.99), "p99-ack-ms")
	if want := int64(b.N); routed.Load()+ignored.Load() != want {
		b.Fatalf("delivered %d, want %d (one per message)", routed.Load()+ignored.Load(), want)
	}
}

// BenchmarkNormaliseDedupe is the in-process part alone: parse an Events API
// body, normalise, claim and commit the dedupe key.
func BenchmarkNormaliseDedupe(b *testing.B) {
	f := newFake(b)
	a, _ := newAdapter(b, testConfig(f, ModeSocket))
	if _, err := a.Self(context.Background()); err != nil {
		b.Fatal(err)
	}
	a.vis.put(chPublic, core.Public)
	bodies := make([][]byte, 1000)
	for i := range bodies {
		ts := fmt.Sprintf("1700000000.%06d", i)
		bodies[i] = f.EventCallbackJSON("Ev", f.MessageEvent(chPublic, bob, "lunch anyone? the usual place at noon", ts, ""))
	}
	ctx := context.Background()
	deliver := func(context.Context, core.Inbound) error { return nil }
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		ev, err := slackevents.ParseEvent(bodies[i%len(bodies)], slackevents.OptionNoVerifyToken())
		if err != nil {
			b.Fatal(err)
		}
		items := a.fromEventsAPI(ctx, ev)
		if err := a.deliverAll(ctx, items, deliver, time.Now().Add(time.Second)); err != nil {
			b.Fatal(err)
		}
	}
}
