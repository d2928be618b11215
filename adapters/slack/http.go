package slack

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"
)

// maxBody bounds an Events API request body (Slack's are a few KiB).
const maxBody = 1 << 20

// Handler serves the Events API (http mode): POST /slack/events (event
// callbacks and the url_verification handshake) and POST
// /slack/interactions (block_actions). Every request must carry a valid
// v0 signature no more than 5 minutes old; anything else gets 401 and is
// neither delivered, nor deduplicated, nor logged with its content. An event
// is answered 200 only after deliver returned nil; otherwise 5xx, so Slack
// retries. The paths are absolute: mount the handler at "/" (or at
// "/slack/") of the server on MARLOWE_HTTP_ADDR, without stripping a prefix.
func (a *Adapter) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /slack/events", a.serveEvents)
	mux.HandleFunc("POST /slack/interactions", a.serveInteractions)
	return mux
}

// verified reads the body and checks its signature. On failure it has
// already answered the request.
func (a *Adapter) verified(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		http.Error(w, "request too large", http.StatusRequestEntityTooLarge)
		return nil, false
	}
	sv, err := slack.NewSecretsVerifier(r.Header, a.cfg.SigningSecret)
	if err == nil {
		_, _ = sv.Write(body)
		err = sv.Ensure()
	}
	if err != nil {
		// No content, no ids: a forged or stale request leaves no trace.
		a.log.Debug("slack: rejected unsigned, forged or stale request", "reason", rejectReason(err))
		http.Error(w, "invalid signature", http.StatusUnauthorized)
		return nil, false
	}
	return body, true
}

func rejectReason(err error) string {
	switch {
	case errors.Is(err, slack.ErrExpiredTimestamp):
		return "stale timestamp"
	case errors.Is(err, slack.ErrMissingHeaders):
		return "missing headers"
	case errors.Is(err, slack.ErrInvalidConfiguration):
		return "no signing secret configured"
	default:
		return "bad signature"
	}
}

func (a *Adapter) serveEvents(w http.ResponseWriter, r *http.Request) {
	body, ok := a.verified(w, r)
	if !ok {
		return
	}
	var outer struct {
		Type      string `json:"type"`
		Challenge string `json:"challenge"`
	}
	if err := json.Unmarshal(body, &outer); err != nil {
		// Signed, so it came from Slack: acknowledge it, or Slack retries a
		// body that will never parse (and counts the failures against the
		// app). Nothing is delivered.
		a.log.Debug("slack: unparsable signed event body acknowledged")
		w.WriteHeader(http.StatusOK)
		return
	}
	switch outer.Type {
	case slackevents.URLVerification:
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{"challenge": outer.Challenge})
		return
	case slackevents.AppRateLimited:
		a.log.Warn("slack: Slack is rate limiting this app's event subscriptions")
		w.WriteHeader(http.StatusOK)
		return
	case slackevents.CallbackEvent:
	default:
		w.WriteHeader(http.StatusOK)
		return
	}
	ev, err := slackevents.ParseEvent(json.RawMessage(body), slackevents.OptionNoVerifyToken())
	if err != nil {
		// An inner event type slack-go does not know: nothing we deliver.
		a.log.Debug("slack: unparsed event acknowledged", "type", ev.Type)
		w.WriteHeader(http.StatusOK)
		return
	}
	retry, _ := strconv.Atoi(r.Header.Get("X-Slack-Retry-Num"))
	a.serveDelivery(r.Context(), w, retry, func(ctx context.Context) []inbound { return a.fromEventsAPI(ctx, ev) })
}

func (a *Adapter) serveInteractions(w http.ResponseWriter, r *http.Request) {
	body, ok := a.verified(w, r)
	if !ok {
		return
	}
	form, err := url.ParseQuery(string(body))
	var ic slack.InteractionCallback
	if err == nil && form.Get("payload") != "" {
		err = json.Unmarshal([]byte(form.Get("payload")), &ic)
	} else if err == nil {
		err = errors.New("no payload")
	}
	if err != nil {
		// Signed but unusable: acknowledged (a retry would fail the same
		// way), nothing delivered.
		a.log.Debug("slack: unparsable signed interaction acknowledged")
		w.WriteHeader(http.StatusOK)
		return
	}
	retry, _ := strconv.Atoi(r.Header.Get("X-Slack-Retry-Num"))
	a.serveDelivery(r.Context(), w, retry, func(context.Context) []inbound { return markReplays(a.fromInteraction(&ic), retry) })
}

// serveDelivery delivers through the active Run and answers 200 only when
// every item was delivered (or was a duplicate).
func (a *Adapter) serveDelivery(ctx context.Context, w http.ResponseWriter, retry int, build func(context.Context) []inbound) {
	received := a.now()
	a.runMu.RLock()
	defer a.runMu.RUnlock()
	if !a.running || a.deliver == nil {
		http.Error(w, errNotRunning.Error(), http.StatusServiceUnavailable)
		return
	}
	items := build(ctx)
	if len(items) == 0 {
		w.WriteHeader(http.StatusOK)
		return
	}
	if err := a.deliverAll(ctx, items, a.deliver, received.Add(a.cfg.AckTimeout)); err != nil {
		a.log.Warn("slack: delivery not acknowledged; Slack will retry", "retry", retry, "err", err)
		http.Error(w, "not delivered", http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusOK)
	a.acked(received)
}
