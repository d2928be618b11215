package slack

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"net/http/httputil"
	"net/url"

	"github.com/marlowe-bot/marlowe/adapters/slack/slackfake"
	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/internal/dedupe"
)

type httpEnv struct {
	f    *slackfake.Server
	a    *Adapter
	logs *logBuffer
	rec  *recorder
	dd   *dedupe.Memory
	srv  *httptest.Server
}

func newHTTPEnv(t *testing.T) *httpEnv {
	t.Helper()
	f := newFake(t)
	dd := dedupe.NewMemory(nil)
	a, logs := newAdapter(t, testConfig(f, ModeHTTP), WithDeduper(dd))
	rec := newRecorder()
	run(t, a, rec.deliver)
	srv := httptest.NewServer(a.Handler())
	t.Cleanup(srv.Close)
	waitUntil(t, 3*time.Second, "Run to start", a.takesDeliveries)
	return &httpEnv{f: f, a: a, logs: logs, rec: rec, dd: dd, srv: srv}
}

func (e *httpEnv) post(t *testing.T, path string, body []byte, at time.Time, secret string, hdr map[string]string) (int, string) {
	t.Helper()
	ct := "application/json"
	if path == "/slack/interactions" {
		ct = "application/x-www-form-urlencoded"
	}
	req, err := slackfake.SignedRequest(e.srv.URL+path, secret, at, ct, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

const secret = "test-signing-secret"

func TestHTTPURLVerification(t *testing.T) {
	e := newHTTPEnv(t)
	body := []byte(`{"token":"x","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}`)
	code, resp := e.post(t, "/slack/events", body, time.Now(), secret, nil)
	if code != 200 || !strings.Contains(resp, `"challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"`) {
		t.Fatalf("url_verification = %d %s", code, resp)
	}
	// Unsigned handshakes are refused like everything else.
	if code, _ := e.post(t, "/slack/events", body, time.Now(), "wrong-secret", nil); code != 401 {
		t.Fatalf("forged url_verification = %d, want 401", code)
	}
}

func TestHTTPValidEventDeliveredThenAcked(t *testing.T) {
	e := newHTTPEnv(t)
	ts := e.f.AddMessage(chPublic, "", alice, "x")
	body := e.f.EventCallbackJSON("Ev1", e.f.AppMentionEvent(chPublic, alice, botMention(e.f)+" status please", ts, ""))
	code, _ := e.post(t, "/slack/events", body, time.Now(), secret, nil)
	if code != 200 {
		t.Fatalf("status %d", code)
	}
	evs := e.rec.events()
	if len(evs) != 1 || evs[0].Text != "status please" || !evs[0].MentionsBot || evs[0].Visibility != core.Public {
		t.Fatalf("delivered %+v", evs)
	}
	// Slack's retry (X-Slack-Retry-Num) and the message twin: 200, not delivered again.
	code, _ = e.post(t, "/slack/events", body, time.Now(), secret, map[string]string{"X-Slack-Retry-Num": "1", "X-Slack-Retry-Reason": "http_timeout"})
	twin := e.f.EventCallbackJSON("Ev2", e.f.MessageEvent(chPublic, alice, botMention(e.f)+" status please", ts, ""))
	code2, _ := e.post(t, "/slack/events", twin, time.Now(), secret, nil)
	if code != 200 || code2 != 200 || len(e.rec.events()) != 1 {
		t.Fatalf("retry %d, twin %d, delivered %d; want 200, 200, 1", code, code2, len(e.rec.events()))
	}
}

func TestHTTPForgedAndStaleRejectedWithoutTrace(t *testing.T) {
	e := newHTTPEnv(t)
	ts := e.f.AddMessage(chPublic, "", alice, "x")
	body := e.f.EventCallbackJSON("Ev1", e.f.MessageEvent(chPublic, alice, "the launch code is hunter2", ts, ""))

	cases := map[string]func() (int, string){
		"forged": func() (int, string) { return e.post(t, "/slack/events", body, time.Now(), "not-the-secret", nil) },
		"stale": func() (int, string) {
			return e.post(t, "/slack/events", body, time.Now().Add(-6*time.Minute), secret, nil)
		},
		"future": func() (int, string) {
			return e.post(t, "/slack/events", body, time.Now().Add(6*time.Minute), secret, nil)
		},
		"unsigned": func() (int, string) {
			resp, err := http.Post(e.srv.URL+"/slack/events", "application/json", strings.NewReader(string(body)))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			return resp.StatusCode, ""
		},
		"tampered": func() (int, string) {
			req, _ := slackfake.SignedRequest(e.srv.URL+"/slack/events", secret, time.Now(), "application/json", body)
			req.Body = io.NopCloser(strings.NewReader(strings.Replace(string(body), "hunter2", "hunter3", 1)))
			req.ContentLength = -1
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			return resp.StatusCode, ""
		},
		"forged click": func() (int, string) {
			return e.post(t, "/slack/interactions", slackfake.InteractionForm(e.f.BlockActionsJSON(slackfake.Click{
				Channel: chPublic, MessageTS: ts, User: bob, BlockID: "c", ActionID: "approve", Value: "tok",
			})), time.Now(), "not-the-secret", nil)
		},
	}
	for name, do := range cases {
		if code, _ := do(); code != http.StatusUnauthorized {
			t.Errorf("%s: status %d, want 401", name, code)
		}
	}
	if e.rec.callCount() != 0 {
		t.Fatalf("deliver called %d times for rejected requests", e.rec.callCount())
	}
	if e.dd.Len() != 0 {
		t.Fatalf("rejected requests left %d dedupe keys", e.dd.Len())
	}
	if logs := e.logs.String(); strings.Contains(logs, "hunter") || strings.Contains(logs, ts) || strings.Contains(logs, chPublic) {
		t.Fatalf("rejected request content in logs:\n%s", logs)
	}
	// The genuine request is still accepted afterwards (nothing was marked).
	if code, _ := e.post(t, "/slack/events", body, time.Now(), secret, nil); code != 200 || e.rec.callCount() != 1 {
		t.Fatalf("genuine request after forgeries: %d, %d deliveries", code, e.rec.callCount())
	}
}

func TestHTTPDeliverErrorIs5xxThenRetrySucceeds(t *testing.T) {
	e := newHTTPEnv(t)
	e.rec.setHook(func(ctx context.Context, n int, in core.Inbound) error {
		if n == 1 {
			return errors.New("journal down")
		}
		return nil
	})
	ts := e.f.AddMessage(chDM, "", alice, "x")
	body := e.f.EventCallbackJSON("Ev1", e.f.MessageEvent(chDM, alice, "hello", ts, ""))
	if code, _ := e.post(t, "/slack/events", body, time.Now(), secret, nil); code < 500 {
		t.Fatalf("status %d, want 5xx so Slack retries", code)
	}
	if code, _ := e.post(t, "/slack/events", body, time.Now(), secret, map[string]string{"X-Slack-Retry-Num": "1"}); code != 200 {
		t.Fatalf("retry status %d", code)
	}
	if evs := e.rec.events(); len(evs) != 1 || evs[0].Visibility != core.DM {
		t.Fatalf("delivered %+v", evs)
	}
}

// Concurrent duplicate deliveries (a retry racing a slow first attempt):
// the second waits for the first and is answered 200 without a second
// deliver.
func TestHTTPConcurrentDuplicateWaitsForInFlight(t *testing.T) {
	e := newHTTPEnv(t)
	e.rec.setHook(func(ctx context.Context, n int, in core.Inbound) error {
		time.Sleep(300 * time.Millisecond)
		return nil
	})
	ts := e.f.AddMessage(chPublic, "", alice, "x")
	body := e.f.EventCallbackJSON("Ev1", e.f.MessageEvent(chPublic, alice, "hi", ts, ""))
	var wg sync.WaitGroup
	codes := make([]int, 4)
	for i := range codes {
		wg.Go(func() { codes[i], _ = e.post(t, "/slack/events", body, time.Now(), secret, nil) })
	}
	wg.Wait()
	for i, c := range codes {
		if c != 200 {
			t.Errorf("request %d: %d", i, c)
		}
	}
	if e.rec.callCount() != 1 {
		t.Fatalf("deliver called %d times, want 1", e.rec.callCount())
	}
}

func TestHTTPInteractionClick(t *testing.T) {
	e := newHTTPEnv(t)
	cardTS := e.f.AddMessage(chPublic, "", e.f.Config().BotUserID, "card")
	form := slackfake.InteractionForm(e.f.BlockActionsJSON(slackfake.Click{
		Channel: chPublic, MessageTS: cardTS, User: bob, UserName: "bob",
		BlockID: "card-7", ActionID: "decline", Value: "signed.token", Label: "Decline",
	}))
	if code, _ := e.post(t, "/slack/interactions", form, time.Now(), secret, nil); code != 200 {
		t.Fatalf("status %d", code)
	}
	clicks := e.rec.clicks()
	if len(clicks) != 1 || clicks[0].Action != "decline" || clicks[0].Token != "signed.token" || clicks[0].By.ID != bob || clicks[0].Card != "card-7" || clicks[0].Scope.Thread != "" {
		t.Fatalf("clicks = %+v", clicks)
	}
	// Slack's retry of the same click is not a second click.
	if code, _ := e.post(t, "/slack/interactions", form, time.Now(), secret, map[string]string{"X-Slack-Retry-Num": "1"}); code != 200 || len(e.rec.clicks()) != 1 {
		t.Fatalf("retried click: %d, %d clicks", code, len(e.rec.clicks()))
	}
	// The same click replayed as a new request reaches the engine, which
	// refuses it visibly (the approval is decided once, whatever arrives).
	if code, _ := e.post(t, "/slack/interactions", form, time.Now(), secret, nil); code != 200 || len(e.rec.clicks()) != 2 {
		t.Fatalf("replayed click: %d, %d clicks", code, len(e.rec.clicks()))
	}
}

func TestHTTPNotRunningIs503(t *testing.T) {
	f := newFake(t)
	a, _ := newAdapter(t, testConfig(f, ModeHTTP))
	srv := httptest.NewServer(a.Handler())
	defer srv.Close()
	ts := f.AddMessage(chPublic, "", alice, "x")
	body := f.EventCallbackJSON("Ev1", f.MessageEvent(chPublic, alice, "hi", ts, ""))
	req, _ := slackfake.SignedRequest(srv.URL+"/slack/events", secret, time.Now(), "application/json", body)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("status %d, want 503 before Run", resp.StatusCode)
	}
	var m map[string]any
	_ = json.Unmarshal(body, &m)
}

// TestHTTPEventBeforeIdentityIsNotAcked: an event that reaches the HTTP
// endpoint while Run is still asking auth.test who the bot is must not be
// acknowledged: the bot cannot yet tell its own mention from chatter, so
// delivering it would lose the mention. It is answered 503 (Slack retries)
// and, once the identity is known, delivered as the mention it is.
func TestHTTPEventBeforeIdentityIsNotAcked(t *testing.T) {
	f := newFake(t)
	release := make(chan struct{})
	target, _ := url.Parse(f.APIURL())
	proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: target.Scheme, Host: target.Host})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "auth.test") {
			select {
			case <-release:
			case <-r.Context().Done():
				return
			}
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(slow.Close)
	unblock := sync.OnceFunc(func() { close(release) })
	t.Cleanup(unblock) // before slow.Close, which waits for the held auth.test
	cfg := testConfig(f, ModeHTTP)
	cfg.APIURL = slow.URL + target.Path
	a, _ := newAdapter(t, cfg)
	rec := newRecorder()
	run(t, a, rec.deliver)
	srv := httptest.NewServer(a.Handler())
	t.Cleanup(srv.Close)
	env := &httpEnv{f: f, a: a, rec: rec, srv: srv}

	ts := f.AddMessage(chPublic, "", alice, "x")
	body := f.EventCallbackJSON("Ev1", f.MessageEvent(chPublic, alice, botMention(f)+" status please", ts, ""))
	if code, _ := env.post(t, "/slack/events", body, time.Now(), secret, nil); code != http.StatusServiceUnavailable {
		t.Fatalf("event before the identity: status %d, want 503 (not acknowledged)", code)
	}
	if n := len(rec.events()); n != 0 {
		t.Fatalf("%d events delivered before the bot knew its own id", n)
	}
	unblock()
	// Run takes deliveries only after auth.test and the agent-surface
	// check that follows it; before, Slack is asked to retry (503).
	waitUntil(t, 5*time.Second, "Run to take deliveries", a.takesDeliveries)
	code, _ := env.post(t, "/slack/events", body, time.Now(), secret, map[string]string{"X-Slack-Retry-Num": "1", "X-Slack-Retry-Reason": "http_error"})
	evs := rec.events()
	if code != http.StatusOK || len(evs) != 1 || !evs[0].MentionsBot {
		t.Fatalf("retry after the identity: status %d, delivered %+v; want 200 and one mention", code, evs)
	}
}

// takesDeliveries reports whether Run has begun taking HTTP deliveries.
func (a *Adapter) takesDeliveries() bool {
	a.runMu.RLock()
	defer a.runMu.RUnlock()
	return a.running && a.identity().userID != ""
}
