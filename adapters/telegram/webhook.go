package telegram

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"io"
	"net/http"
)

// maxBody bounds a webhook body (updates are a few KiB).
const maxBody = 1 << 20

// WebhookPath is where Telegram POSTs updates in webhook mode.
const WebhookPath = "/telegram/webhook"

// StatusPath reports the connection's readiness, including privacy mode.
const StatusPath = "/telegram/status"

// Handler serves POST /telegram/webhook (webhook mode). The
// X-Telegram-Bot-Api-Secret-Token header must equal TELEGRAM_WEBHOOK_SECRET
// (compared in constant time, lengths included); a wrong or missing one gets
// 401 and is neither parsed, delivered, deduplicated nor logged with any
// content. An update is answered 200 only once it is durable (delivered,
// deduplicated or ignorable); otherwise 503, and Telegram retries. The
// webhook is served in webhook mode only. GET /telegram/status (both modes)
// answers 200 once getMe succeeded, 503 before, with the bot's username,
// the mode and whether privacy mode is on. Mount it at "/" or "/telegram/"
// of the server on MARLOWE_HTTP_ADDR.
func (a *Adapter) Handler() http.Handler {
	mux := http.NewServeMux()
	if a.cfg.Mode == ModeWebhook {
		mux.HandleFunc("POST "+WebhookPath, a.serveWebhook)
	}
	mux.HandleFunc("GET "+StatusPath, a.serveStatus)
	return mux
}

func (a *Adapter) serveStatus(w http.ResponseWriter, _ *http.Request) {
	id := a.identity()
	st := map[string]any{"ready": id.id != 0, "mode": a.cfg.Mode}
	if id.id != 0 {
		st["username"] = id.username
		st["privacy_mode"] = !id.readAll
		if !id.readAll {
			st["warning"] = "privacy mode is on: in groups only mentions, replies to the bot and its commands arrive; untagged follow-ups never do (@BotFather → /setprivacy → Disable)"
		}
	}
	w.Header().Set("Content-Type", "application/json")
	if id.id == 0 {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	_ = json.NewEncoder(w).Encode(st)
}

// secretOK compares hashes, so neither the content nor the length of the
// configured secret leaks through timing.
func (a *Adapter) secretOK(got string) bool {
	if a.cfg.WebhookSecret == "" {
		return false // webhook mode without a secret is refused by Validate
	}
	g := sha256.Sum256([]byte(got))
	w := sha256.Sum256([]byte(a.cfg.WebhookSecret))
	return subtle.ConstantTimeCompare(g[:], w[:]) == 1 && got != ""
}

func (a *Adapter) serveWebhook(w http.ResponseWriter, r *http.Request) {
	if !a.secretOK(r.Header.Get("X-Telegram-Bot-Api-Secret-Token")) {
		a.log.Debug("telegram: webhook request without the right secret refused")
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		http.Error(w, "request too large", http.StatusRequestEntityTooLarge)
		return
	}
	var u update
	if err := json.Unmarshal(body, &u); err != nil || u.UpdateID == 0 {
		// From Telegram (the secret matched) but unusable: acknowledged,
		// since a retry would fail the same way.
		a.log.Warn("telegram: unparsable webhook update acknowledged and dropped")
		w.WriteHeader(http.StatusOK)
		return
	}
	received := a.now()
	a.runMu.RLock()
	defer a.runMu.RUnlock()
	if !a.running || a.deliver == nil {
		http.Error(w, errNotRunning.Error(), http.StatusServiceUnavailable)
		return
	}
	if a.identity().id == 0 {
		// Run has not resolved the bot's username yet (getMe): without it
		// "/status@bot" and "@bot" would read as addressed to someone else.
		// Telegram retries.
		http.Error(w, "telegram: bot identity not resolved yet", http.StatusServiceUnavailable)
		return
	}
	if err := a.handleUpdate(r.Context(), &u, a.deliver); err != nil {
		a.log.Warn("telegram: webhook update not delivered; Telegram will retry", "update_id", u.UpdateID, "err", err)
		http.Error(w, "not delivered", http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusOK)
	a.acked(received)
}
