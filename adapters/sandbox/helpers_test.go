package sandbox

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
)

// fakeClock ticks one millisecond per reading, from a fixed start.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{t: time.Date(2026, 3, 2, 9, 30, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(time.Millisecond)
	return c.t
}

// recorder is a fake deliver that records every inbound item.
type recorder struct {
	ch  chan core.Inbound
	err error
}

func newRecorder() *recorder { return &recorder{ch: make(chan core.Inbound, 100)} }

func (r *recorder) deliver(_ context.Context, in core.Inbound) error {
	r.ch <- in
	return r.err
}

func (r *recorder) next(t *testing.T) core.Inbound {
	t.Helper()
	select {
	case in := <-r.ch:
		return in
	case <-time.After(5 * time.Second):
		t.Fatal("nothing delivered within 5s")
		return core.Inbound{}
	}
}

func (r *recorder) nextEvent(t *testing.T) core.Event {
	t.Helper()
	in := r.next(t)
	if in.Event == nil {
		t.Fatalf("delivered %+v, want an event", in)
	}
	return *in.Event
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// newSandbox builds a sandbox on a free loopback port with a fake clock.
func newSandbox(t *testing.T, cfg Config) *Sandbox {
	t.Helper()
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:0"
	}
	if cfg.Clock == nil {
		cfg.Clock = newFakeClock().Now
	}
	if cfg.Logger == nil {
		cfg.Logger = testLogger(t)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return s
}

// run starts s.Run with deliver and returns the base URL (no trailing
// slash). Cleanup stops it and checks that Run returned cleanly.
func run(t *testing.T, s *Sandbox, deliver func(context.Context, core.Inbound) error) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	url, err := s.Listen(ctx)
	if err != nil {
		t.Fatalf("Listen: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, deliver) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Run did not return within 10s of cancel")
		}
	})
	return strings.TrimSuffix(url, "/")
}

func postJSON(t *testing.T, url string, body any) (int, []byte) {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(url, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

// say posts a person's message through the page's API and returns its id.
func say(t *testing.T, base, person, channel, thread, text string) string {
	t.Helper()
	code, body := postJSON(t, base+"/api/messages", map[string]string{"person": person, "channel": channel, "thread": thread, "text": text})
	if code != http.StatusCreated {
		t.Fatalf("say: status %d: %s", code, body)
	}
	var m message
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	return m.ID
}

// sseEvent is one parsed Server-Sent Event.
type sseEvent struct {
	ID    string
	Event string
	Data  string
}

// stream opens the event stream (with Last-Event-ID when last != "") and
// returns its events; it closes the connection at cleanup.
func stream(t *testing.T, base, last string) (<-chan sseEvent, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	if last != "" {
		req.Header.Set("Last-Event-ID", last)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatalf("GET events: %v", err)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	out := make(chan sseEvent, 100)
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(out)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev.Event != "" || ev.Data != "" {
					out <- ev
				}
				ev = sseEvent{}
			case strings.HasPrefix(line, "id: "):
				ev.ID = line[4:]
			case strings.HasPrefix(line, "event: "):
				ev.Event = line[7:]
			case strings.HasPrefix(line, "data: "):
				ev.Data = line[6:]
			}
		}
	})
	stop := func() { cancel(); wg.Wait() }
	t.Cleanup(stop)
	return out, stop
}

func nextSSE(t *testing.T, ch <-chan sseEvent) sseEvent {
	t.Helper()
	select {
	case ev, ok := <-ch:
		if !ok {
			t.Fatal("event stream ended")
		}
		return ev
	case <-time.After(5 * time.Second):
		t.Fatal("no event within 5s")
		return sseEvent{}
	}
}

func noSSE(t *testing.T, ch <-chan sseEvent, d time.Duration) {
	t.Helper()
	select {
	case ev := <-ch:
		t.Fatalf("unexpected event %+v", ev)
	case <-time.After(d):
	}
}

func decodeMsg(t *testing.T, ev sseEvent) message {
	t.Helper()
	if ev.Event != "message" {
		t.Fatalf("event %q, want message", ev.Event)
	}
	var m message
	if err := json.Unmarshal([]byte(ev.Data), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func botPost(t *testing.T, s *Sandbox, key, channel, thread, text string) core.MessageRef {
	t.Helper()
	ref, err := s.Post(context.Background(), core.Outbound{Key: key, Scope: core.Scope{Platform: Platform, Workspace: Workspace, Channel: channel, Thread: thread}, Text: text})
	if err != nil {
		t.Fatalf("Post: %v", err)
	}
	return ref
}

// findMessage returns a copy of the first message of sb that cond accepts.
func findMessage(sb *Sandbox, cond func(m message) bool) (message, bool) {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	for _, m := range sb.msgs {
		if cond(*m) {
			return *m, true
		}
	}
	return message{}, false
}

// waitMessage polls sb (the sandbox has no event to await from outside
// its page) until a message cond accepts is there, for up to 10 s.
func waitMessage(t *testing.T, sb *Sandbox, what string, cond func(m message) bool) message {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if m, ok := findMessage(sb, cond); ok {
			return m
		}
	}
	sb.mu.Lock()
	for _, m := range sb.msgs {
		t.Logf("message %s bot=%v thread=%s text=%q stream=%+v", m.ID, m.Bot, m.Thread, m.Text, m.Stream)
	}
	sb.mu.Unlock()
	t.Fatalf("timed out waiting for %s", what)
	return message{}
}
