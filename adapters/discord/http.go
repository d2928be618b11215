package discord

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sync"

	"github.com/bwmarrin/discordgo"
)

// maxInteractionBody bounds an interactions request body.
const maxInteractionBody = 1 << 20

// Handler serves Discord's HTTP interactions endpoint, mounted at
// /discord/interactions, when Config.PublicKey (DISCORD_PUBLIC_KEY) is set;
// nil otherwise. Every request must carry a valid Ed25519 signature
// (discordgo.VerifyInteraction) or is refused with 401; PING is answered
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

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
