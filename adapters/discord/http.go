package discord

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/bwmarrin/discordgo"
)

// maxInteractionBody bounds an interactions request body.
const maxInteractionBody = 1 << 20

// Handler serves Discord's HTTP interactions endpoint, mounted at
// /discord/interactions, when Config.PublicKey (DISCORD_PUBLIC_KEY) is set;
// nil otherwise. Every request must carry a valid Ed25519 signature
// (discordgo.VerifyInteraction) made within five minutes of now, or is
// refused with 401; PING is answered
// with PONG; button clicks are delivered and answered in the response body
// within the ack timeout, like clicks over the gateway.
func (a *Adapter) Handler() http.Handler {
	key, err := parsePublicKey(a.cfg.PublicKey)
	if a.cfg.PublicKey == "" || err != nil {
		return nil
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /discord/interactions", func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, maxInteractionBody)
		if !discordgo.VerifyInteraction(r, key) {
			http.Error(w, "invalid request signature", http.StatusUnauthorized)
			return
		}
		// The signature covers the timestamp but says nothing about its age:
		// a request captured yesterday verifies today. Refuse one signed
		// more than maxInteractionSkew from now, either way, as Slack's
		// verifier does, so a replay dies at the door and not only at the
		// dedupe.
		if !freshTimestamp(r.Header.Get("X-Signature-Timestamp"), a.now()) {
			a.log.Debug("discord: rejected a stale interaction timestamp")
			http.Error(w, "stale request timestamp", http.StatusUnauthorized)
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, "bad body", http.StatusBadRequest)
			return
		}
		var i discordgo.Interaction
		if err := json.Unmarshal(body, &i); err != nil {
			http.Error(w, "bad interaction", http.StatusBadRequest)
			return
		}
		if i.Type == discordgo.InteractionPing {
			writeJSON(w, &discordgo.InteractionResponse{Type: discordgo.InteractionResponsePong})
			return
		}
		a.runMu.RLock()
		running := a.running
		a.runMu.RUnlock()
		if !running {
			http.Error(w, "not running", http.StatusServiceUnavailable)
			return
		}
		// The response goes in this request's body: handleInteraction's
		// send hands it over instead of calling the callback endpoint.
		var once sync.Once
		got := make(chan *discordgo.InteractionResponse, 1)
		send := func(_ context.Context, _ *discordgo.Interaction, resp *discordgo.InteractionResponse) error {
			once.Do(func() { got <- resp })
			return nil
		}
		received := a.now()
		a.handleInteraction(r.Context(), &i, send)
		select {
		case resp := <-got:
			writeJSON(w, resp)
		default:
			w.WriteHeader(http.StatusNoContent)
		}
		a.acked(received)
	})
	return mux
}

// maxInteractionSkew is how far a signed interaction's timestamp may be
// from now, past or future (Slack's verifier allows the same).
const maxInteractionSkew = 5 * time.Minute

// freshTimestamp reports whether ts, Unix seconds as Discord signs them, is
// within maxInteractionSkew of now.
func freshTimestamp(ts string, now time.Time) bool {
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return false
	}
	d := now.Sub(time.Unix(sec, 0))
	return d <= maxInteractionSkew && d >= -maxInteractionSkew
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
