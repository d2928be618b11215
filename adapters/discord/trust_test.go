package discord

import (
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/adapters/discord/discordfake"
	"github.com/marlowe-bot/marlowe/core"
)

// ATTACK: a click signed two days ago (captured off the wire, or from a
// log) is replayed. The signature verifies, so only the timestamp's age
// can refuse it; a timestamp from the future is refused the same way.
func TestHTTPInteractionRefusesAStaleSignedTimestamp(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(nil)
	f := newFake(t, discordfake.Config{})
	a, err := New(Config{BotToken: "test-token", APIURL: f.APIURL(), PublicKey: hex.EncodeToString(pub)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.Handler())
	t.Cleanup(srv.Close)
	ping := []byte(`{"id":"1","type":1,"token":"t","application_id":"2"}`)
	now := time.Now()
	for _, tc := range []struct {
		name string
		at   time.Time
		want int
	}{
		{"two days ago", now.Add(-48 * time.Hour), http.StatusUnauthorized},
		{"six minutes ago", now.Add(-6 * time.Minute), http.StatusUnauthorized},
		{"six minutes ahead", now.Add(6 * time.Minute), http.StatusUnauthorized},
		{"four minutes ago", now.Add(-4 * time.Minute), http.StatusOK},
		{"now", now, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := postInteraction(t, srv.URL, ping, priv, strconv.FormatInt(tc.at.Unix(), 10))
			if res.StatusCode != tc.want {
				t.Fatalf("signed %s: status %d, want %d", tc.name, res.StatusCode, tc.want)
			}
		})
	}
	// Not a number: signed, but no age to check.
	if res := postInteraction(t, srv.URL, ping, priv, "yesterday"); res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("non-numeric timestamp: status %d", res.StatusCode)
	}
}

// ATTACK: one hostile text (an answer, or a quoted injected message) that
// would page the guild (@everyone, @here, a role) goes through every
// outbound path: a post, a long post split in parts, a card, an edit, a
// file's caption. The fake reads each body as Discord does (no
// allowed_mentions means every mention is parsed) and records what would
// have notified: nothing may.
func TestEveryOutboundPathPingsNoOne(t *testing.T) {
	hostile := "ping @everyone and @here and <@&" + roleDev + "> now"
	f := newFake(t, discordfake.Config{})
	a := startAdapter(t, f, newRecorder().deliver)
	ctx := context.Background()
	card := &core.Card{ID: "c1", Title: hostile, Body: hostile, Fields: []core.CardField{{Label: hostile, Value: hostile}},
		Actions: []core.CardAction{{ID: "approve", Label: "Approve", Token: "tok"}}}
	var posted core.MessageRef
	for _, tc := range []struct {
		name string
		do   func() error
	}{
		{"post", func() error {
			var err error
			posted, err = a.Post(ctx, core.Outbound{Key: "k-post", Scope: scopeOf(general, ""), Text: hostile})
			return err
		}},
		{"long post", func() error {
			_, err := a.Post(ctx, core.Outbound{Key: "k-long", Scope: scopeOf(general, ""), Text: strings.Repeat(hostile+"\n", 120)})
			return err
		}},
		{"card", func() error {
			_, err := a.Post(ctx, core.Outbound{Key: "k-card", Scope: scopeOf(general, ""), Text: hostile, Card: card})
			return err
		}},
		{"edit", func() error {
			return a.Update(ctx, posted, core.Outbound{Scope: scopeOf(general, ""), Text: "edited " + hostile})
		}},
		{"edit card", func() error {
			c := *card
			c.Actions, c.Resolution = nil, hostile
			return a.Update(ctx, posted, core.Outbound{Scope: scopeOf(general, ""), Card: &c})
		}},
		{"file caption", func() error {
			return a.UploadFile(ctx, scopeOf(general, ""), core.File{Name: "x.txt", Title: hostile, Type: "text/plain", Content: []byte("data")})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(f.Calls())
			if err := tc.do(); err != nil {
				t.Fatal(err)
			}
			if len(f.Calls()) == before {
				t.Fatal("no request was made")
			}
		})
	}
	if p := f.Pings(); len(p) > 0 {
		t.Fatalf("mass mentions Discord would have notified: %+v", p)
	}
	// The fake does notice one: a body without allowed_mentions pings.
	bare, _ := json.Marshal(map[string]string{"content": hostile})
	if n := len(discordfake.PingsOf("POST", "channels/"+general+"/messages", bare)); n != 3 {
		t.Fatalf("the fake's reading of a bare body found %d pings, want 3", n)
	}
}
