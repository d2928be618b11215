package telegram

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/adapters/telegram/telegramfake"
	"github.com/marlowe-bot/marlowe/core"
)

// Test chats and people.
var (
	group   = telegramfake.Chat{ID: -1001, Type: "supergroup", Title: "team"}
	forum   = telegramfake.Chat{ID: -1002, Type: "supergroup", Title: "forum", IsForum: true}
	legacy  = telegramfake.Chat{ID: -77, Type: "group", Title: "old"}
	bcast   = telegramfake.Chat{ID: -1003, Type: "channel", Title: "news"}
	alice   = telegramfake.User{ID: 501, FirstName: "Alice", Username: "alice"}
	bob     = telegramfake.User{ID: 502, FirstName: "Bob", Username: "bob"}
	other   = telegramfake.User{ID: 900, IsBot: true, FirstName: "Other", Username: "other_bot"}
	aliceDM = telegramfake.Chat{ID: 501, Type: "private"}
)

const wait = 10 * time.Second

func newFake(t testing.TB, mod ...func(*telegramfake.Config)) *telegramfake.Server {
	t.Helper()
	cfg := telegramfake.Config{MaxPollWait: 2 * time.Second}
	for _, m := range mod {
		m(&cfg)
	}
	f := telegramfake.New(cfg)
	t.Cleanup(f.Close)
	return f
}

func testConfig(f *telegramfake.Server, mode Mode) Config {
	return Config{
		BotToken:      f.Config().Token,
		Mode:          mode,
		APIURL:        f.URL(),
		WebhookSecret: "s3cret_Token-abc",
		PollTimeout:   time.Second,
	}
}

// logBuffer captures the adapter's logs so tests can check what is (never)
// logged.
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
	base := []Option{WithLogger(logs.logger()), WithPace(0, 1, 0, 0)}
	a, err := New(cfg, append(base, opts...)...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return a, logs
}

// recorder is a deliver func that records what it was given; hook, when
// set, decides the result (and may block).
type recorder struct {
	mu      sync.Mutex
	got     []core.Inbound
	calls   int
	hook    func(ctx context.Context, n int, in core.Inbound) error
	changed chan struct{}
}

func newRecorder() *recorder { return &recorder{changed: make(chan struct{})} }

func (r *recorder) deliver(ctx context.Context, in core.Inbound) error {
	r.mu.Lock()
	r.calls++
	n, hook := r.calls, r.hook
	r.mu.Unlock()
	var err error
	if hook != nil {
		err = hook(ctx, n, in)
	}
	r.mu.Lock()
	if err == nil {
		r.got = append(r.got, in)
	}
	close(r.changed)
	r.changed = make(chan struct{})
	r.mu.Unlock()
	return err
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

// await blocks until cond holds, re-checking on every delivery.
func (r *recorder) await(t testing.TB, what string, cond func() bool) {
	t.Helper()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		r.mu.Lock()
		ch := r.changed
		r.mu.Unlock()
		if cond() {
			return
		}
		select {
		case <-ch:
		case <-timer.C:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// awaitFake blocks until cond holds, re-checking on every change to f.
func awaitFake(t testing.TB, f *telegramfake.Server, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := f.Wait(ctx, cond); err != nil {
		t.Fatalf("timed out waiting for %s", what)
	}
}

// run starts a.Run and stops it when the test ends (or when stop is
// called), failing the test if Run errs or does not return promptly.
func run(t testing.TB, a *Adapter, deliver func(context.Context, core.Inbound) error) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx, deliver) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
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
	t.Cleanup(stop)
	return stop
}

// polling starts a polling adapter on f with a fresh recorder.
func polling(t testing.TB, f *telegramfake.Server, opts ...Option) (*Adapter, *recorder, *logBuffer) {
	t.Helper()
	a, logs := newAdapter(t, testConfig(f, ModePolling), opts...)
	rec := newRecorder()
	run(t, a, rec.deliver)
	return a, rec, logs
}

// eventually polls cond (for what has no change notification: logs, an
// HTTP server becoming ready).
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
