package discord

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/adapters/discord/discordfake"
	"github.com/marlowe-bot/marlowe/core"
)

const (
	guildID   = "300000000000000001"
	general   = "300000000000000010"
	secret    = "300000000000000011"
	ops       = "300000000000000012"
	oldThread = "300000000000000013" // an existing thread in general
	privThr   = "300000000000000014" // a private thread in general
	roleAdmin = "300000000000000020"
	roleMod   = "300000000000000021"
	roleDev   = "300000000000000022"
)

var (
	alice    = discordfake.User{ID: "200000000000000001", Username: "alice"}
	bob      = discordfake.User{ID: "200000000000000002", Username: "bob"}
	carol    = discordfake.User{ID: "200000000000000003", Username: "carol"}
	otherBot = discordfake.User{ID: "200000000000000009", Username: "otherbot", Bot: true}
)

func testGuild() discordfake.Guild {
	return discordfake.Guild{
		ID: guildID, OwnerID: carol.ID,
		Channels: []discordfake.Channel{
			{ID: general, Type: discordfake.TypeText, Name: "general"},
			{ID: secret, Type: discordfake.TypeText, Name: "secret", Private: true},
			{ID: ops, Type: discordfake.TypeText, Name: "ops"},
			{ID: oldThread, Type: discordfake.TypePublicThread, Name: "old", Parent: general},
			{ID: privThr, Type: discordfake.TypePrivateThread, Name: "private", Parent: general},
		},
		Roles: []discordfake.Role{
			{ID: guildID, Permissions: discordfake.PermViewChannel},
			{ID: roleAdmin, Permissions: discordfake.PermAdministrator},
			{ID: roleMod, Permissions: discordfake.PermManageGuild},
			{ID: roleDev, Permissions: discordfake.PermViewChannel},
		},
		Members: []discordfake.Member{
			{UserID: alice.ID, Roles: []string{roleAdmin}},
			{UserID: bob.ID, Roles: []string{roleDev}},
			{UserID: "200000000000000004", Roles: []string{roleMod}},
		},
	}
}

func newFake(t testing.TB, cfg discordfake.Config) *discordfake.Server {
	t.Helper()
	if cfg.Guilds == nil {
		cfg.Guilds = []discordfake.Guild{testGuild()}
	}
	if cfg.Token == "" {
		cfg.Token = "test-token"
	}
	f := discordfake.New(cfg)
	t.Cleanup(f.Close)
	return f
}

// recorder is a deliver func that keeps what it was given.
type recorder struct {
	mu    sync.Mutex
	items []core.Inbound
	fail  int // fail this many deliveries first
	ch    chan struct{}
}

func newRecorder() *recorder { return &recorder{ch: make(chan struct{})} }

func (r *recorder) deliver(_ context.Context, in core.Inbound) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail > 0 {
		r.fail--
		return errTest
	}
	r.items = append(r.items, in)
	close(r.ch)
	r.ch = make(chan struct{})
	return nil
}

type testErr string

func (e testErr) Error() string { return string(e) }

const errTest = testErr("test: deliver refused")

func (r *recorder) events() []core.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []core.Event
	for _, it := range r.items {
		if it.Event != nil {
			out = append(out, *it.Event)
		}
	}
	return out
}

func (r *recorder) clicks() []core.CardClick {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []core.CardClick
	for _, it := range r.items {
		if it.Click != nil {
			out = append(out, *it.Click)
		}
	}
	return out
}

// waitFor waits until cond holds over the delivered items.
func (r *recorder) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		ch := r.ch
		r.mu.Unlock()
		if cond() {
			return
		}
		select {
		case <-ch:
		case <-deadline.C:
			t.Fatalf("timed out waiting for %s; delivered %+v", what, r.events())
		}
	}
}

// eventByText returns the delivered event whose text is text.
func (r *recorder) eventByText(text string) (core.Event, bool) {
	evs := r.events()
	i := slices.IndexFunc(evs, func(e core.Event) bool { return e.Text == text })
	if i < 0 {
		return core.Event{}, false
	}
	return evs[i], true
}

// startAdapter runs an adapter against f until the test ends.
func startAdapter(t testing.TB, f *discordfake.Server, deliver func(context.Context, core.Inbound) error, opts ...Option) *Adapter {
	t.Helper()
	return startAdapterConfig(t, f, Config{}, deliver, opts...)
}

// startAdapterConfig is startAdapter with cfg (its token and API URL are
// the fake's).
func startAdapterConfig(t testing.TB, f *discordfake.Server, cfg Config, deliver func(context.Context, core.Inbound) error, opts ...Option) *Adapter {
	t.Helper()
	return startAdapterSetup(t, f, cfg, deliver, nil, opts...)
}

// startAdapterSetup is startAdapterConfig with setup run on the adapter
// before Run (e.g. to hold the re-IDENTIFY pause).
func startAdapterSetup(t testing.TB, f *discordfake.Server, cfg Config, deliver func(context.Context, core.Inbound) error, setup func(*Adapter), opts ...Option) *Adapter {
	t.Helper()
	opts = append([]Option{WithLogger(discardLog()), WithChannelPace(0, 1)}, opts...)
	cfg.BotToken, cfg.APIURL = "test-token", f.APIURL()
	a, err := New(cfg, opts...)
	if err != nil {
		t.Fatal(err)
	}
	a.reidentify = func() time.Duration { return 10 * time.Millisecond }
	if setup != nil {
		setup(a)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx, deliver) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(15 * time.Second):
			t.Error("Run did not return")
		}
	})
	connected := make(chan bool, 1)
	go func() { connected <- f.WaitConnected(10 * time.Second) }()
	select {
	case ok := <-connected:
		if !ok {
			t.Fatal("the adapter never connected to the fake gateway")
		}
	case err := <-done:
		done <- err // for the cleanup
		t.Fatalf("Run returned before connecting: %v", err)
	}
	return a
}

func discardLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// postInteraction POSTs body to an interactions endpoint at url, signed
// with key (unsigned when nil) at timestamp ts, as Discord does.
func postInteraction(t *testing.T, url string, body []byte, key ed25519.PrivateKey, ts string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url+"/discord/interactions", bytes.NewReader(body))
	if key != nil {
		req.Header.Set("X-Signature-Ed25519", hex.EncodeToString(ed25519.Sign(key, append([]byte(ts), body...))))
		req.Header.Set("X-Signature-Timestamp", ts)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { res.Body.Close() })
	return res
}
