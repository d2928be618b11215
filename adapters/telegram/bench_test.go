package telegram

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/adapters/telegram/telegramfake"
	"github.com/marlowe-bot/marlowe/core"
)

// BenchmarkPollReceive measures fake Bot API → getUpdates (real SDK
// transport, loopback) → decode → dedupe → normalise → deliver → offset
// confirmed. 90% of updates are untagged chatter, 10% mention the bot
// after an emoji. Reports updates/s and the latency from injection to
// deliver (p50, p99). Injected as fast as possible, so the latency is that
// of draining a burst of b.N updates.
func BenchmarkPollReceive(b *testing.B) { pollReceive(b, 0) }

// BenchmarkPollReceiveAt200 offers the same load paced at 200 updates/s:
// the latency is then one update's way through a waiting long poll. Run it
// with -benchtime 2000x (10 s) or more.
func BenchmarkPollReceiveAt200(b *testing.B) { pollReceive(b, 200) }

func pollReceive(b *testing.B, rate int) {
	f := newFake(b)
	a, _ := newAdapter(b, testConfig(f, ModePolling))
	var mu sync.Mutex
	sentAt := map[string]time.Time{}
	var lat []time.Duration
	done := make(chan struct{})
	n := b.N
	deliver := func(_ context.Context, in core.Inbound) error {
		mu.Lock()
		defer mu.Unlock()
		if t0, ok := sentAt[in.Event.MessageID]; ok {
			lat = append(lat, time.Since(t0))
		}
		if len(lat) == n {
			close(done)
		}
		return nil
	}
	run(b, a, deliver)
	b.ResetTimer()
	start := time.Now()
	var tick *time.Ticker
	if rate > 0 {
		tick = time.NewTicker(time.Second / time.Duration(rate))
		defer tick.Stop()
	}
	for i := range n {
		if tick != nil {
			<-tick.C
		}
		text := "lunch anyone? the usual place"
		if i%10 == 0 {
			text = "🚀 @marlowe_test_bot how did the deploy go?"
		}
		mu.Lock()
		_, id := f.Inject(telegramfake.Incoming{Chat: group, From: alice, Text: text})
		sentAt[itoa(id)] = time.Now()
		mu.Unlock()
	}
	<-done
	el := time.Since(start)
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(n)/el.Seconds(), "updates/s")
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}

// BenchmarkWebhookReceive is one webhook POST → secret check → decode →
// dedupe → normalise → deliver → 200, over loopback HTTP.
func BenchmarkWebhookReceive(b *testing.B) {
	f := newFake(b)
	a, _ := newAdapter(b, testConfig(f, ModeWebhook))
	run(b, a, func(context.Context, core.Inbound) error { return nil })
	srv := httptest.NewServer(a.Handler())
	b.Cleanup(srv.Close)
	client := srv.Client()
	post := func(id int) int {
		body := strings.Replace(webhookBody, "7001", itoa(int64(id)), 1)
		req, _ := http.NewRequest(http.MethodPost, srv.URL+WebhookPath, strings.NewReader(body))
		req.Header.Set("X-Telegram-Bot-Api-Secret-Token", "s3cret_Token-abc")
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for post(1) != http.StatusOK { // until Run has registered deliver
		time.Sleep(time.Millisecond)
	}
	b.ResetTimer()
	for i := range b.N {
		if st := post(i + 10); st != http.StatusOK {
			b.Fatalf("status %d", st)
		}
	}
}

// BenchmarkNormaliseDedupe is the in-process part alone: decode an update,
// normalise it (UTF-16 entities), claim and commit its dedupe key.
func BenchmarkNormaliseDedupe(b *testing.B) {
	a, _ := newAdapter(b, Config{BotToken: "123456:TEST-token-0123456789", APIURL: "http://127.0.0.1:1"})
	a.id = identity{id: 123456, username: "marlowe_test_bot"}
	raw := []byte(webhookBody)
	ctx := context.Background()
	b.ReportAllocs()
	for i := range b.N {
		var u update
		if err := json.Unmarshal(raw, &u); err != nil {
			b.Fatal(err)
		}
		u.UpdateID = int64(i)
		err := a.deliverOnce(ctx, "upd:1:"+itoa(u.UpdateID), core.Inbound{}, func(context.Context, core.Inbound) error {
			ev, err := a.normalise(u.Message, false)
			if err != nil || !ev.MentionsBot {
				b.Fatalf("normalise: %+v %v", ev, err)
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}
