package slack

import (
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/socketmode"

	"github.com/marlowe-bot/marlowe/internal/dedupe"
)

// The receive deadline is on the adapter's clock: a clock an hour behind
// the wall (a test's, or a skew) still gives the engine AckTimeout to
// take the event. The deadline was made on the injected clock and waited
// for on the wall clock, so it had passed before the delivery began and
// every event was refused.
func TestReceiveDeadlineOnTheInjectedClock(t *testing.T) {
	f := newFake(t)
	a, _ := newAdapter(t, testConfig(f, ModeHTTP), WithDeduper(dedupe.NewMemory(nil)))
	a.now = func() time.Time { return time.Now().Add(-time.Hour) }
	rec := newRecorder()
	run(t, a, rec.deliver)
	srv := httptest.NewServer(a.Handler())
	t.Cleanup(srv.Close)
	waitUntil(t, 3*time.Second, "Run to start", a.takesDeliveries)
	e := &httpEnv{f: f, a: a, rec: rec, srv: srv}

	ts := f.AddMessage(chPublic, "", alice, "x")
	body := f.EventCallbackJSON("Ev1", f.AppMentionEvent(chPublic, alice, botMention(f)+" status please", ts, ""))
	if code, resp := e.post(t, "/slack/events", body, time.Now(), secret, nil); code != 200 {
		t.Fatalf("status %d %s, want 200", code, resp)
	}
	if n := len(rec.events()); n != 1 {
		t.Fatalf("%d events delivered, want 1", n)
	}
}

// An ack waits at most AckTimeout to be handed to slack-go. While slack-go
// reconnects it reads no responses (its queue holds 20) until the receive
// loop reads its events, and the loop was waiting for lanes held by acks
// with no bound: at 1,000 events/s the bot then stopped receiving for good
// (BenchmarkThroughput, a goroutine dump: 16 acks in SendCtx, the loop in
// lanes.Add, slack-go's connect in sendEvent). Against a client that is
// not running, the old ack never returned once the queue was full.
func TestAckIsBoundedWhileSlackGoReadsNoResponses(t *testing.T) {
	f := newFake(t)
	cfg := testConfig(f, ModeSocket)
	cfg.AckTimeout = 20 * time.Millisecond
	a, _ := newAdapter(t, cfg)
	smc := socketmode.New(slack.New("xoxb-test", slack.OptionAppLevelToken("xapp-test")))
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 25 { // past the queue of 20
			a.ack(t.Context(), smc, fmt.Sprint("env-", i))
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("an ack blocked while slack-go read no responses")
	}
}
