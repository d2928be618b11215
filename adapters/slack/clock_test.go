package slack

import (
	"net/http/httptest"
	"testing"
	"time"
)

// The receive deadline is on the adapter's clock: a clock an hour behind
// the wall (a test's, or a skew) still gives the engine AckTimeout to
// take the event. The deadline was made on the injected clock and waited
// for on the wall clock, so it had passed before the delivery began and
// every event was refused.
func TestReceiveDeadlineOnTheInjectedClock(t *testing.T) {
	f := newFake(t)
	a, _ := newAdapter(t, testConfig(f, ModeHTTP), WithDeduper(NewMemoryDeduper(nil)))
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
