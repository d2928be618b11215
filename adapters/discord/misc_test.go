package discord

import (
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/adapters/discord/discordfake"
	"github.com/marlowe-bot/marlowe/core"
)

// Admins for governance: the guild owner, and members whose roles grant
// Administrator or Manage Server; nobody in a DM.
func TestIsAdmin(t *testing.T) {
	f := newFake(t, discordfake.Config{})
	a, err := New(Config{BotToken: "test-token", APIURL: f.APIURL()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, tc := range []struct {
		name, user string
		want       bool
	}{
		{"owner", carol.ID, true},
		{"administrator role", alice.ID, true},
		{"manage server role", "200000000000000004", true},
		{"plain member", bob.ID, false},
		{"not a member", "299999999999999999", false},
	} {
		got, err := a.IsAdmin(ctx, scopeOf(general, ""), tc.user)
		if err != nil || got != tc.want {
			t.Errorf("%s: IsAdmin = %v, %v; want %v", tc.name, got, err, tc.want)
		}
	}
	if got, err := a.IsAdmin(ctx, core.Scope{Platform: Platform, Channel: "400000000000000001"}, carol.ID); got || err != nil {
		t.Errorf("DM: IsAdmin = %v, %v", got, err)
	}
	if _, err := a.IsAdmin(ctx, core.Scope{Platform: Platform, Workspace: "399999999999999999", Channel: "x"}, carol.ID); err == nil {
		t.Error("unknown guild: no error")
	}
}

func TestOpenDMReactHistory(t *testing.T) {
	f := newFake(t, discordfake.Config{})
	rec := newRecorder()
	a := startAdapter(t, f, rec.deliver)
	ctx := context.Background()
	dm, err := a.OpenDM(ctx, bob.ID)
	if err != nil || dm.Channel == "" || dm.Platform != Platform || dm.Workspace != "" {
		t.Fatalf("OpenDM = %+v, %v", dm, err)
	}
	if _, err := a.Post(ctx, core.Outbound{Key: "dm-1", Scope: dm, Text: "a DM"}); err != nil {
		t.Fatal(err)
	}
	m1 := f.Say(discordfake.Msg{Channel: oldThread, Author: alice, Content: "first"})
	f.Say(discordfake.Msg{Channel: oldThread, Author: bob, Content: "second"})
	rec.waitFor(t, "two", func() bool { return len(rec.events()) == 2 })
	if err := a.React(ctx, core.MessageRef{Scope: scopeOf(general, oldThread), ID: m1}, ":eyes:"); err != nil {
		t.Fatal(err)
	}
	if r := f.Reactions(); len(r) != 1 || r[0].ChannelID != oldThread || r[0].Emoji != "👀" {
		t.Fatalf("reactions %+v", r)
	}
	h, err := a.History(ctx, scopeOf(general, oldThread), 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(h) != 2 || h[0].Text != "first" || h[1].Text != "second" || h[0].Scope.Thread != oldThread || h[0].Visibility != core.Public {
		t.Fatalf("history %+v", h)
	}
}

// A deliver that fails is retried (Discord never redelivers a gateway
// event); once it succeeds the message is there once.
func TestDeliverRetried(t *testing.T) {
	f := newFake(t, discordfake.Config{})
	rec := newRecorder()
	rec.fail = 2
	startAdapter(t, f, rec.deliver)
	f.Say(discordfake.Msg{Channel: general, Author: alice, Content: "retry me"})
	rec.waitFor(t, "retried", func() bool { _, ok := rec.eventByText("retry me"); return ok })
	if n := len(rec.events()); n != 1 {
		t.Fatalf("%d deliveries", n)
	}
}

// The HTTP interactions endpoint refuses unsigned or mis-signed requests
// with 401, answers PING, and takes clicks like the gateway.
func TestHTTPInteractions(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(nil)
	f := newFake(t, discordfake.Config{})
	rec := newRecorder()
	a, err := New(Config{BotToken: "test-token", APIURL: f.APIURL(), PublicKey: hex.EncodeToString(pub)})
	if err != nil {
		t.Fatal(err)
	}
	h := a.Handler()
	if h == nil {
		t.Fatal("no handler with a public key")
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	post := func(body []byte, key ed25519.PrivateKey, ts string) *http.Response {
		t.Helper()
		return postInteraction(t, srv.URL, body, key, ts)
	}
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	ping := []byte(`{"id":"1","type":1,"token":"t","application_id":"2"}`)
	if res := post(ping, nil, ts); res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("unsigned: %d", res.StatusCode)
	}
	_, other, _ := ed25519.GenerateKey(nil)
	if res := post(ping, other, ts); res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("wrong key: %d", res.StatusCode)
	}
	res := post(ping, priv, ts)
	var pong struct{ Type int }
	if res.StatusCode != 200 || json.NewDecoder(res.Body).Decode(&pong) != nil || pong.Type != 1 {
		t.Fatalf("PING: %d %+v", res.StatusCode, pong)
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx, rec.deliver) }()
	t.Cleanup(func() { cancel(); <-done })
	if !f.WaitConnected(10 * time.Second) {
		t.Fatal("not connected")
	}
	click := []byte(`{"id":"300000000000000999","type":3,"token":"t","application_id":"2","guild_id":"` + guildID + `","channel_id":"` + general +
		`","member":{"user":{"id":"` + bob.ID + `","username":"bob"},"roles":[]},"data":{"custom_id":"ap.aMAC","component_type":2}}`)
	res = post(click, priv, ts)
	var ack struct{ Type int }
	if res.StatusCode != 200 || json.NewDecoder(res.Body).Decode(&ack) != nil || ack.Type != 6 {
		t.Fatalf("click: %d %+v", res.StatusCode, ack)
	}
	if cs := rec.clicks(); len(cs) != 1 || cs[0].By.ID != bob.ID || cs[0].Token != "ap.aMAC" {
		t.Fatalf("clicks %+v", cs)
	}
}

// Run returns promptly when its context ends and leaves no goroutine behind.
func TestRunStopsCleanly(t *testing.T) {
	f := newFake(t, discordfake.Config{})
	before := runtime.NumGoroutine()
	a, err := New(Config{BotToken: "test-token", APIURL: f.APIURL()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx, newRecorder().deliver) }()
	if !f.WaitConnected(10 * time.Second) {
		t.Fatal("not connected")
	}
	f.Reconnect() // mid-reconnect shutdown too
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return")
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before+2 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before+2 {
		buf := make([]byte, 1<<16)
		t.Fatalf("%d goroutines after Run, %d before:\n%s", n, before, buf[:runtime.Stack(buf, true)])
	}
}
