package discord

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/adapters/discord/discordfake"
	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/intent"
)

// BenchmarkGatewayReceive measures receive → dedupe → normalise → filter →
// handed over (deliver returned: Discord has no ack, this is the point a
// message is safe), from the fake's dispatch over a loopback WebSocket. 90%
// of messages are chatter, every 10th mentions the bot; deliver runs the
// intent filter's pure decision. At most 256 messages are in flight.
func BenchmarkGatewayReceive(b *testing.B) { gatewayReceive(b, 0) }

// BenchmarkGatewayReceiveAt200 offers the same load at 200 events/s, the
// operating point for latency: run with -benchtime 2000x (10 s) or more.
func BenchmarkGatewayReceiveAt200(b *testing.B) { gatewayReceive(b, 200) }

func gatewayReceive(b *testing.B, rate int) {
	f := newFake(b, discordfake.Config{})
	var (
		sentAt  sync.Map // message id → time dispatched
		mu      sync.Mutex
		lat     []time.Duration
		handled atomic.Int64
		routed  atomic.Int64
	)
	deliver := func(_ context.Context, in core.Inbound) error {
		if in.Event == nil {
			return nil
		}
		if intent.Decide(*in.Event, intent.Windows{}, time.Now()).Route {
			routed.Add(1)
		}
		if t0, ok := sentAt.Load(in.Event.MessageID); ok {
			d := time.Since(t0.(time.Time))
			mu.Lock()
			lat = append(lat, d)
			mu.Unlock()
		}
		handled.Add(1)
		return nil
	}
	startAdapter(b, f, deliver)
	bot := f.Bot()
	chans := []string{general, ops, secret, oldThread}
	const window = 256
	var tick *time.Ticker
	if rate > 0 {
		tick = time.NewTicker(time.Second / time.Duration(rate))
		defer tick.Stop()
	}
	b.ResetTimer()
	start := time.Now()
	for i := range b.N {
		if tick != nil {
			<-tick.C
		}
		for int64(i)-handled.Load() >= window {
			time.Sleep(50 * time.Microsecond)
		}
		m := discordfake.Msg{Channel: chans[i%len(chans)], Author: bob, Content: "lunch anyone? the usual place at noon"}
		if i%10 == 0 {
			m = discordfake.Msg{Channel: chans[i%len(chans)], Author: alice, Content: "<@" + bot.ID + "> what's the status of the deploy?"}
		}
		now := time.Now()
		id := f.Say(m)
		sentAt.Store(id, now)
	}
	deadline := time.Now().Add(30 * time.Second)
	for handled.Load() < int64(b.N) {
		if time.Now().After(deadline) {
			b.Fatalf("handled %d of %d", handled.Load(), b.N)
		}
		time.Sleep(100 * time.Microsecond)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(lat)
	pct := func(p float64) float64 {
		if len(lat) == 0 {
			return 0
		}
		return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))]) / float64(time.Millisecond)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "events/s")
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	if want := int64((b.N + 9) / 10); routed.Load() != want {
		b.Fatalf("routed %d, want %d (the mentions only)", routed.Load(), want)
	}
}
