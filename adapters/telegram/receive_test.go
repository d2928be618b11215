package telegram

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/adapters/telegram/telegramfake"
	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/internal/dedupe"
)

// An update is confirmed (dropped by Telegram) only after deliver returned
// nil: a failing deliver leaves it pending and it comes back, in order,
// before anything after it.
func TestPollingConfirmsOnlyAfterDeliver(t *testing.T) {
	f := newFake(t)
	var fail atomic.Bool
	fail.Store(true)
	a, _ := newAdapter(t, testConfig(f, ModePolling))
	rec := newRecorder()
	rec.hook = func(_ context.Context, n int, in core.Inbound) error {
		if fail.Load() {
			return errors.New("journal unavailable")
		}
		return nil
	}
	run(t, a, rec.deliver)
	u1, _ := f.Inject(telegramfake.Incoming{Chat: group, From: alice, Text: "first"})
	u2, _ := f.Inject(telegramfake.Incoming{Chat: group, From: alice, Text: "second"})
	rec.await(t, "two failed attempts", func() bool { return rec.callCount() >= 2 })
	if got := f.Pending(); !slices.Contains(got, u1) || !slices.Contains(got, u2) {
		t.Fatalf("pending %v after failed deliveries: want both %d and %d still pending", got, u1, u2)
	}
	if len(rec.events()) != 0 {
		t.Fatal("nothing was delivered successfully yet")
	}
	fail.Store(false)
	rec.await(t, "both delivered", func() bool { return len(rec.events()) == 2 })
	if e := rec.events(); e[0].Text != "first" || e[1].Text != "second" {
		t.Fatalf("order: %q, %q", e[0].Text, e[1].Text)
	}
	awaitFake(t, f, "both confirmed", func() bool { return len(f.Pending()) == 0 })
}

// A crash between receiving and journaling: the process dies while deliver
// runs (nothing journaled); a new process (fresh offset) is given the same
// update again and delivers it once.
func TestCrashBeforeJournalRedelivers(t *testing.T) {
	f := newFake(t)
	a1, _ := newAdapter(t, testConfig(f, ModePolling))
	entered := make(chan struct{})
	rec1 := newRecorder()
	rec1.hook = func(ctx context.Context, _ int, _ core.Inbound) error {
		close(entered)
		<-ctx.Done() // the process dies here
		return ctx.Err()
	}
	stop1 := run(t, a1, rec1.deliver)
	u, _ := f.Inject(telegramfake.Incoming{Chat: group, From: alice, Text: "@marlowe_test_bot deploy?"})
	<-entered
	stop1()
	if !slices.Contains(f.Pending(), u) {
		t.Fatal("the update was confirmed although it was never delivered")
	}
	_, rec2, _ := polling(t, f)
	rec2.await(t, "redelivery to the new process", func() bool { return len(rec2.events()) == 1 })
	if ev := rec2.events()[0]; !ev.MentionsBot || ev.Text != "deploy?" {
		t.Fatalf("redelivered %+v", ev)
	}
	awaitFake(t, f, "confirmed", func() bool { return len(f.Pending()) == 0 })
	if n := rec2.callCount(); n != 1 {
		t.Fatalf("delivered %d times, want once", n)
	}
}

// A crash after journaling but before the offset is confirmed: the next
// process gets the update again, and the shared deduper (store/redis's in
// production) drops it: delivered once.
func TestDedupeOnUpdateIDAcrossRestart(t *testing.T) {
	f := newFake(t)
	dd := dedupe.NewMemory(nil)
	a1, _ := newAdapter(t, testConfig(f, ModePolling), WithDeduper(dd))
	ctx, crash := context.WithCancel(context.Background())
	defer crash()
	rec1 := newRecorder()
	rec1.hook = func(context.Context, int, core.Inbound) error {
		// Journaled; now the process dies before any getUpdates can
		// confirm the offset (the fake refuses them all).
		f.RateLimit("getUpdates", 1000, time.Second)
		crash()
		return nil
	}
	done := make(chan error, 1)
	go func() { done <- a1.Run(ctx, rec1.deliver) }()
	u, _ := f.Inject(telegramfake.Incoming{Chat: group, From: alice, Text: "@marlowe_test_bot once"})
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if len(rec1.events()) != 1 || !slices.Contains(f.Pending(), u) {
		t.Fatalf("setup: delivered %d, pending %v", len(rec1.events()), f.Pending())
	}
	f.ClearRateLimit("getUpdates")

	_, rec2, _ := polling(t, f, WithDeduper(dd))
	awaitFake(t, f, "the redelivered update confirmed", func() bool { return len(f.Pending()) == 0 })
	if n := rec2.callCount(); n != 0 {
		t.Fatalf("redelivered update reached deliver %d times, want 0 (deduplicated on update_id)", n)
	}
}

// Polling while a webhook is set: Telegram answers 409; the adapter says
// why instead of spinning silently.
func TestPollingWithWebhookSetSaysWhy(t *testing.T) {
	f := newFake(t)
	a, _ := newAdapter(t, testConfig(f, ModeWebhook))
	if err := a.callInto(context.Background(), "setWebhook", params("url", "http://127.0.0.1:1/telegram/webhook"), nil); err != nil {
		t.Fatal(err)
	}
	_, _, logs := polling(t, f)
	awaitFake(t, f, "a refused getUpdates", func() bool { return f.CallCount("getUpdates") >= 1 })
	eventually(t, "the 409 explained in the log", func() bool { return strings.Contains(logs.String(), "a webhook is set for this bot") })
}

func webhookServer(t *testing.T, a *Adapter) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(a.Handler())
	t.Cleanup(srv.Close)
	return srv
}

func postUpdate(t *testing.T, url, secret, body string, withHeader bool) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url+WebhookPath, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if withHeader {
		req.Header.Set("X-Telegram-Bot-Api-Secret-Token", secret)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

const webhookBody = `{"update_id": 7001, "message": {"message_id": 9, "date": 1800000000,
 "chat": {"id": -1001, "type": "supergroup", "title": "team"},
 "from": {"id": 501, "is_bot": false, "first_name": "Alice"},
 "text": "@marlowe_test_bot SECRET-PAYLOAD", "entities": [{"type": "mention", "offset": 0, "length": 17}]}}`

// Webhook mode: only the right secret gets in (401 otherwise, no trace in
// the logs, nothing delivered); a retry of the same update_id is delivered
// once; a failed delivery is 503 so Telegram retries; getUpdates and
// setWebhook are never called without MARLOWE_TELEGRAM_WEBHOOK_URL.
func TestWebhookSecretAndDedupe(t *testing.T) {
	f := newFake(t)
	a, logs := newAdapter(t, testConfig(f, ModeWebhook))
	rec := newRecorder()
	var failNext atomic.Bool
	rec.hook = func(context.Context, int, core.Inbound) error {
		if failNext.Swap(false) {
			return errors.New("journal down")
		}
		return nil
	}
	run(t, a, rec.deliver)
	srv := webhookServer(t, a)
	awaitFake(t, f, "getMe", func() bool { return f.CallCount("getMe") >= 1 })
	// Before Run has registered deliver, a request may get 503; wait for it.
	eventually(t, "Run serving the webhook", func() bool {
		return postUpdate(t, srv.URL, "s3cret_Token-abc", `{"update_id": 1, "channel_post": {"message_id": 1, "date": 1, "chat": {"id": -5, "type": "channel"}}}`, true) == 200
	})

	for _, tc := range []struct {
		name   string
		secret string
		header bool
	}{
		{"missing", "", false},
		{"empty", "", true},
		{"wrong, same length", "s3cret_Token-abd", true},
		{"wrong, prefix", "s3cret", true},
		{"wrong, longer", "s3cret_Token-abc-and-more", true},
		{"other case", "S3CRET_TOKEN-ABC", true},
	} {
		if got := postUpdate(t, srv.URL, tc.secret, webhookBody, tc.header); got != http.StatusUnauthorized {
			t.Errorf("%s secret: status %d, want 401", tc.name, got)
		}
	}
	if rec.callCount() != 0 {
		t.Fatalf("a refused request reached deliver")
	}
	if strings.Contains(logs.String(), "SECRET-PAYLOAD") || strings.Contains(logs.String(), "7001") {
		t.Fatal("a refused request left a trace in the logs")
	}

	failNext.Store(true)
	if got := postUpdate(t, srv.URL, "s3cret_Token-abc", webhookBody, true); got != http.StatusServiceUnavailable {
		t.Fatalf("failed delivery: status %d, want 503", got)
	}
	for i := range 3 { // Telegram's retries
		if got := postUpdate(t, srv.URL, "s3cret_Token-abc", webhookBody, true); got != http.StatusOK {
			t.Fatalf("good secret, attempt %d: status %d", i, got)
		}
	}
	if ev := rec.events(); len(ev) != 1 || !ev[0].MentionsBot {
		t.Fatalf("delivered %+v, want the mention once", ev)
	}
	if n := f.CallCount("getUpdates"); n != 0 {
		t.Fatalf("getUpdates called %d times in webhook mode", n)
	}
	if n := f.CallCount("setWebhook"); n != 0 {
		t.Fatalf("setWebhook called without %s", EnvWebhookURL)
	}
	if strings.Contains(logs.String(), "SECRET-PAYLOAD") {
		t.Fatal("message text was logged")
	}
}

// With MARLOWE_TELEGRAM_WEBHOOK_URL the adapter registers the webhook with
// its secret_token, and Telegram's pushes (retried until a 2xx) arrive.
func TestWebhookRegisteredAndPushed(t *testing.T) {
	f := newFake(t)
	cfg := testConfig(f, ModeWebhook)
	a, _ := newAdapter(t, cfg)
	srv := webhookServer(t, a)
	a.cfg.WebhookURL = srv.URL + WebhookPath
	rec := newRecorder()
	run(t, a, rec.deliver)
	awaitFake(t, f, "setWebhook", func() bool { u, _ := f.Webhook(); return u != "" })
	if u, sec := f.Webhook(); u != srv.URL+WebhookPath || sec != cfg.WebhookSecret {
		t.Fatalf("webhook %q secret %q", u, sec)
	}
	f.Inject(telegramfake.Incoming{Chat: group, From: alice, Text: "@marlowe_test_bot pushed"})
	rec.await(t, "pushed update", func() bool { return len(rec.events()) == 1 })
	awaitFake(t, f, "acknowledged", func() bool { return len(f.Pending()) == 0 })
	if n := f.CallCount("getUpdates"); n != 0 {
		t.Fatalf("getUpdates called %d times in webhook mode", n)
	}
}

func TestConfigWebhookRules(t *testing.T) {
	env := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	tok := "123456:ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	for _, tc := range []struct {
		name string
		env  func(string) string
		err  string
	}{
		{"no token", env(), EnvBotToken},
		{"bad token", env(EnvBotToken, "xoxb-nope"), "does not look like a bot token"},
		{"polling default", env(EnvBotToken, tok), ""},
		{"webhook without secret", env(EnvBotToken, tok, EnvMode, "webhook"), EnvWebhookSecret},
		{"bad secret chars", env(EnvBotToken, tok, EnvMode, "webhook", EnvWebhookSecret, "no spaces allowed"), "1-256"},
		{"webhook url in polling", env(EnvBotToken, tok, EnvWebhookURL, "https://x/telegram/webhook"), EnvMode},
		{"webhook ok", env(EnvBotToken, tok, EnvMode, "webhook", EnvWebhookSecret, "abc_DEF-123", EnvWebhookURL, "https://x/telegram/webhook"), ""},
		{"unknown mode", env(EnvBotToken, tok, EnvMode, "carrier-pigeon"), EnvMode},
		{"bad api url", env(EnvBotToken, tok, EnvAPIURL, "ftp://x"), EnvAPIURL},
		{"bad private chat", env(EnvBotToken, tok, EnvPrivateChats, "-100,abc"), EnvPrivateChats},
	} {
		_, err := ConfigFromEnv(tc.env)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: error %v, want one naming %q", tc.name, err, tc.err)
		case err != nil && strings.Contains(err.Error(), tok):
			t.Errorf("%s: error prints the token", tc.name)
		}
	}
}

// A transport error quotes the request URL, which holds the token: it is
// scrubbed before it reaches an error or a log.
func TestTokenNeverInErrors(t *testing.T) {
	f := newFake(t)
	cfg := testConfig(f, ModePolling)
	f.Close()
	a, logs := newAdapter(t, cfg)
	_, err := a.Self(context.Background())
	if err == nil {
		t.Fatal("Self against a closed server succeeded")
	}
	if strings.Contains(err.Error(), cfg.BotToken) || strings.Contains(logs.String(), cfg.BotToken) {
		t.Fatalf("token leaked: %v", err)
	}
	if !strings.Contains(err.Error(), "<token>") {
		t.Fatalf("error %q: want the URL kept, with the token scrubbed", err)
	}
}

// lease is a Lease the test grants and revokes.
type lease struct {
	mu      sync.Mutex
	asks    chan struct{}
	grant   chan struct{}
	revoke  context.CancelFunc
	granted int
}

func newLease() *lease { return &lease{asks: make(chan struct{}, 10), grant: make(chan struct{})} }

func (l *lease) Acquire(ctx context.Context, name string) (context.Context, func(), error) {
	l.asks <- struct{}{}
	select {
	case <-l.grant:
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
	held, cancel := context.WithCancel(ctx)
	l.mu.Lock()
	l.revoke = cancel
	l.granted++
	l.mu.Unlock()
	return held, cancel, nil
}

func (l *lease) lose() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.revoke()
}

// The poller polls only while it holds the lease, stops at once when the
// lease is lost (its long poll is cut), and resumes where Telegram's
// confirmed offset says once it holds the lease again.
func TestPollerHoldsLease(t *testing.T) {
	f := newFake(t)
	l := newLease()
	_, rec, _ := polling(t, f, WithLease(l))
	<-l.asks
	if n := f.CallCount("getUpdates"); n != 0 {
		t.Fatalf("getUpdates called %d times before the lease was held", n)
	}
	l.grant <- struct{}{}
	f.Inject(telegramfake.Incoming{Chat: group, From: alice, Text: "one"})
	rec.await(t, "first", func() bool { return len(rec.events()) == 1 })

	l.lose()
	<-l.asks // the poll loop has returned and asks again
	polls := f.CallCount("getUpdates")
	f.Inject(telegramfake.Incoming{Chat: group, From: alice, Text: "two"})
	if n := f.CallCount("getUpdates"); n != polls || len(rec.events()) != 1 {
		t.Fatalf("polled without the lease")
	}
	l.grant <- struct{}{}
	rec.await(t, "second, after the lease is back", func() bool { return len(rec.events()) == 2 })
	if n := rec.callCount(); n != 2 {
		t.Fatalf("%d deliveries, want 2", n)
	}
}

// Updates fetched together are delivered per chat: one chat's slow
// delivery (a first append, a lease claim) holds back no other chat's
// update, and nothing past it is confirmed until it is delivered.
func TestSlowChatDelaysNoOtherChatInABatch(t *testing.T) {
	f := newFake(t)
	other := telegramfake.Chat{ID: -2009, Type: "group", Title: "ops"}
	a, _ := newAdapter(t, testConfig(f, ModePolling))
	release := make(chan struct{})
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	rec := newRecorder()
	rec.hook = func(ctx context.Context, n int, in core.Inbound) error {
		if in.Event != nil && in.Event.Text == "stuck" {
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	}
	// Queued before the first poll: one batch.
	stuck, _ := f.Inject(telegramfake.Incoming{Chat: group, From: alice, Text: "stuck"})
	behind, _ := f.Inject(telegramfake.Incoming{Chat: group, From: alice, Text: "behind it"})
	f.Inject(telegramfake.Incoming{Chat: other, From: bob, Text: "elsewhere"})
	run(t, a, rec.deliver)
	rec.await(t, "the other chat's update", func() bool {
		for _, e := range rec.events() {
			if e.Text == "elsewhere" {
				return true
			}
		}
		return false
	})
	for _, e := range rec.events() {
		if e.Text == "behind it" {
			t.Fatal("the slow chat's next update was delivered before the one ahead of it")
		}
	}
	if p := f.Pending(); !slices.Contains(p, stuck) || !slices.Contains(p, behind) {
		t.Fatalf("pending %v while the first is undelivered: want %d and %d still pending", p, stuck, behind)
	}
	once.Do(func() { close(release) })
	awaitFake(t, f, "all confirmed", func() bool { return len(f.Pending()) == 0 })
	var order []string
	for _, e := range rec.events() {
		if e.Text != "elsewhere" {
			order = append(order, e.Text)
		}
	}
	if !slices.Equal(order, []string{"stuck", "behind it"}) {
		t.Fatalf("the slow chat delivered %q, want [stuck behind it]", order)
	}
}

// A batch cut by shutdown, then a restart: every update is delivered
// exactly once. The batch is handled with its context already ended (the
// poller stopping mid-batch): an update the lanes refused to queue must
// not count as delivered, so the offset confirmed on shutdown stops before
// it and the restarted poller fetches it again. (Lanes.Add picks at random
// between a free slot and the ended context: the old loop dropped its
// error, and confirmed about half of such a batch undelivered.)
func TestBatchCutByShutdownIsDeliveredOnceAfterRestart(t *testing.T) {
	f := newFake(t)
	a, _ := newAdapter(t, testConfig(f, ModePolling))
	var ids []int64
	for i := range 40 {
		id, _ := f.Inject(telegramfake.Incoming{Chat: telegramfake.Chat{ID: int64(-3000 - i), Type: "group", Title: "g"}, From: alice, Text: fmt.Sprintf("m%d", i)})
		ids = append(ids, id)
	}
	if _, err := a.refreshIdentity(t.Context()); err != nil { // as Run does first
		t.Fatal(err)
	}
	ups, err := a.getUpdates(t.Context(), 0, 0, 100)
	if err != nil || len(ups) != len(ids) {
		t.Fatalf("fetch the batch: %d updates, %v", len(ups), err)
	}
	rec := newRecorder()
	stopped, cancel := context.WithCancel(t.Context())
	cancel()
	next, _ := a.handleBatch(stopped, ups, 0, rec.deliver)
	delivered := map[string]int{}
	for _, e := range rec.events() {
		delivered[e.Text]++
	}
	for i, u := range ups {
		if u.UpdateID < next && delivered[u.Message.Text] == 0 {
			t.Fatalf("offset %d confirms update %d (%s, #%d of the batch), which was never delivered", next, u.UpdateID, u.Message.Text, i)
		}
	}
	// Shutdown confirms the offset; the restarted poller fetches the rest.
	if next > 0 {
		if _, err := a.getUpdates(t.Context(), next, 0, 1); err != nil {
			t.Fatal(err)
		}
	}
	stop := run(t, a, rec.deliver)
	defer stop()
	rec.await(t, "every update", func() bool {
		n := map[string]bool{}
		for _, e := range rec.events() {
			n[e.Text] = true
		}
		return len(n) == len(ids)
	})
	awaitFake(t, f, "all confirmed", func() bool { return len(f.Pending()) == 0 })
	stop()
	got := map[string]int{}
	for _, e := range rec.events() {
		got[e.Text]++
	}
	for i := range ids {
		if n := got[fmt.Sprintf("m%d", i)]; n != 1 {
			t.Errorf("m%d delivered %d times, want once", i, n)
		}
	}
}
