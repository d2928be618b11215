package discord

import (
	"crypto/ed25519"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/adapters/discord/discordfake"
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
