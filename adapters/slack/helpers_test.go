package slack

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/adapters/slack/slackfake"
	"github.com/marlowe-bot/marlowe/core"
)

// Test ids: the fake's defaults plus a few people and channels.
const (
	chPublic  = "C0PUBLIC01"
	chPrivate = "C0PRIVAT01"
	chGroup   = "G0LEGACY01"
	chMPIM    = "G0MPIM0001"
	chDM      = "D0DIRECT01"
	alice     = "U0ALICE001"
	bob       = "U0BOB00001"
)

func newFake(t testing.TB, mod ...func(*slackfake.Config)) *slackfake.Server {
	t.Helper()
	cfg := slackfake.Config{
		RedeliverAfter: 400 * time.Millisecond,
		Channels: map[string]string{
			chPublic: "channel", chPrivate: "group", chGroup: "group", chMPIM: "mpim", chDM: "im",
		},
	}
	for _, m := range mod {
		m(&cfg)
	}
	f := slackfake.New(cfg)
	t.Cleanup(f.Close)
	return f
}

func botMention(f *slackfake.Server) string { return "<@" + f.Config().BotUserID + ">" }

func testConfig(f *slackfake.Server, mode Mode) Config {
	return Config{
		BotToken:      "xoxb-test-token",
		AppToken:      "xapp-test-token",
		SigningSecret: "test-signing-secret",
		Mode:          mode,
		APIURL:        f.APIURL(),
	}
}

// logBuffer captures the adapter's logs so tests can check that no message
// text is ever logged.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if os.Getenv("MARLOWE_TEST_LOG") == "1" {
		_, _ = os.Stderr.Write(p)
	}
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func newAdapter(t testing.TB, cfg Config, opts ...Option) (*Adapter, *logBuffer) {
	t.Helper()
	logs := &logBuffer{}
	base := []Option{WithLogger(logs.logger()), WithoutLookalikeCheck(), WithChannelPace(0, 1), WithHistoryInterval(0)}
	a, err := New(cfg, append(base, opts...)...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return a, logs
}

// recorder is a deliver func that records what it was given. hook, when
// set, decides the result (and may block).
type recorder struct {
	mu    sync.Mutex
	got   []core.Inbound
	calls int
	hook  func(ctx context.Context, n int, in core.Inbound) error
	note  chan struct{}
}

func newRecorder() *recorder { return &recorder{note: make(chan struct{}, 1024)} }

func (r *recorder) deliver(ctx context.Context, in core.Inbound) error {
	r.mu.Lock()
	r.calls++
	n := r.calls
	hook := r.hook
	r.mu.Unlock()
	var err error
	if hook != nil {
		err = hook(ctx, n, in)
	}
	if err == nil {
		r.mu.Lock()
		r.got = append(r.got, in)
		r.mu.Unlock()
	}
	select {
	case r.note <- struct{}{}:
	default:
	}
	return err
}

func (r *recorder) setHook(h func(ctx context.Context, n int, in core.Inbound) error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.hook = h
}

func (r *recorder) events() []core.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []core.Event
	for _, in := range r.got {
		if in.Event != nil {
			out = append(out, *in.Event)
		}
	}
	return out
}

func (r *recorder) clicks() []core.CardClick {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []core.CardClick
	for _, in := range r.got {
		if in.Click != nil {
			out = append(out, *in.Click)
		}
	}
	return out
}

func (r *recorder) callCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls
}

// run starts a.Run and stops it when the test ends, failing the test if Run
// returns an error or does not return promptly.
func run(t testing.TB, a *Adapter, deliver func(context.Context, core.Inbound) error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx, deliver) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run returned %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("Run did not return within 10s of cancel")
		}
	})
}

// connectSocket runs a (built for Socket Mode against f) with a fresh
// recorder as deliver and waits until f sees it connected. hook, when not
// nil, decides each delivery's result (see recorder).
func connectSocket(t testing.TB, f *slackfake.Server, a *Adapter, hook func(ctx context.Context, n int, in core.Inbound) error) *recorder {
	t.Helper()
	rec := newRecorder()
	if hook != nil {
		rec.setHook(hook)
	}
	run(t, a, rec.deliver)
	if !f.WaitConnected(5 * time.Second) {
		t.Fatal("adapter did not connect")
	}
	return rec
}

func waitUntil(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
