package telegramfake

// Pushing updates to a registered webhook, as Telegram does.

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"time"
)

func (s *Server) setWebhook(u, secret string) (any, *apiErr) {
	s.stopHook()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hookURL, s.hookSec = u, secret
	if u != "" {
		s.hookStop, s.hookDone = make(chan struct{}), make(chan struct{})
		go s.pushLoop(u, secret, s.hookStop, s.hookDone)
	}
	s.notifyLocked()
	return true, nil
}

func (s *Server) stopHook() {
	s.mu.Lock()
	stop, done := s.hookStop, s.hookDone
	s.hookStop, s.hookDone = nil, nil
	s.mu.Unlock()
	if stop != nil {
		close(stop)
		<-done
	}
}

// pushLoop POSTs pending updates to the webhook one at a time, in order,
// dropping each once it got a 2xx, retrying otherwise.
func (s *Server) pushLoop(u, secret string, stop, done chan struct{}) {
	defer close(done)
	client := &http.Client{Timeout: 10 * time.Second}
	for {
		s.mu.Lock()
		ch := s.changed
		var id int64
		var body json.RawMessage
		if len(s.updIDs) > 0 {
			id, body = s.updIDs[0], s.updates[0]
		}
		s.mu.Unlock()
		if body == nil {
			select {
			case <-stop:
				return
			case <-ch:
				continue
			}
		}
		req, _ := http.NewRequest(http.MethodPost, u, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if secret != "" {
			req.Header.Set("X-Telegram-Bot-Api-Secret-Token", secret)
		}
		status := 0
		if resp, err := client.Do(req); err == nil {
			status = resp.StatusCode
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		s.mu.Lock()
		s.hookLog = append(s.hookLog, WebhookDelivery{UpdateID: id, Status: status})
		if status >= 200 && status < 300 && len(s.updIDs) > 0 && s.updIDs[0] == id {
			s.updIDs, s.updates = s.updIDs[1:], s.updates[1:]
		}
		s.notifyLocked()
		s.mu.Unlock()
		if status < 200 || status >= 300 {
			select {
			case <-stop:
				return
			case <-time.After(s.cfg.WebhookRetry):
			}
		}
	}
}
