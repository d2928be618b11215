package slackfake

import (
	"encoding/json"
	"sync"
	"time"
)

// HomeView is one accepted views.publish: the Home tab published for User.
type HomeView struct {
	User string
	View json.RawMessage
	At   time.Time
}

// homeViews records views.publish calls (guarded by its own lock so the
// Server's fields stay as they are).
type homeViews struct {
	mu    sync.Mutex
	views []HomeView
}

// viewsPublish answers views.publish, a JSON-bodied method: user_id and a
// view of type home are required, as on Slack.
func (s *Server) viewsPublish(r apiReq) any {
	var body struct {
		UserID string          `json:"user_id"`
		View   json.RawMessage `json:"view"`
	}
	if len(r.json) == 0 || json.Unmarshal(r.json, &body) != nil {
		return fail("invalid_arguments")
	}
	if body.UserID == "" {
		return fail("invalid_arguments")
	}
	var v struct {
		Type   string            `json:"type"`
		Blocks []json.RawMessage `json:"blocks"`
	}
	if json.Unmarshal(body.View, &v) != nil || v.Type != "home" {
		return fail("invalid_arguments")
	}
	if len(v.Blocks) > 100 {
		return fail("invalid_blocks")
	}
	s.home.mu.Lock()
	s.home.views = append(s.home.views, HomeView{User: body.UserID, View: body.View, At: time.Now()})
	s.home.mu.Unlock()
	return map[string]any{"ok": true, "view": map[string]any{"id": "V" + body.UserID, "type": "home"}}
}

// HomeViews returns every published Home tab, in order.
func (s *Server) HomeViews() []HomeView {
	s.home.mu.Lock()
	defer s.home.mu.Unlock()
	return append([]HomeView(nil), s.home.views...)
}

// AppHomeOpenedEvent is an app_home_opened event for user on tab ("home"
// or "messages").
func (s *Server) AppHomeOpenedEvent(user, tab string) map[string]any {
	return map[string]any{
		"type": "app_home_opened", "user": user, "channel": "D" + user, "tab": tab,
		"event_ts": s.nowTS(),
	}
}

func (s *Server) nowTS() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.nextTSLocked()
}
