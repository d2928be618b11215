package sandbox

import (
	"cmp"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"time"
)

// static holds the page: plain HTML, CSS and JavaScript, no build step.
//
//go:embed static
var static embed.FS

var (
	errBadRequest = errors.New("bad request")
	errForbidden  = errors.New("forbidden")
	errConflict   = errors.New("conflict")
	errBusy       = errors.New("sandbox: too many messages waiting for delivery")
)

// heartbeat is how often an idle event stream sends a comment, so proxies
// and the browser keep it open.
const heartbeat = 15 * time.Second

// Handler returns the workspace's HTTP routes: the page, its assets and the
// JSON/SSE API the page uses. Run serves it; it can also be mounted on
// another server (event streams then end when Run ends or the client goes).
func (s *Sandbox) Handler() http.Handler {
	mux := http.NewServeMux()
	assets, err := fs.Sub(static, "static")
	if err != nil {
		panic(fmt.Sprintf("sandbox: embedded assets: %v", err)) // cannot happen: the directory is embedded
	}
	files := http.FileServerFS(assets)
	mux.Handle("GET /static/", http.StripPrefix("/static/", noCache(files)))
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		http.ServeFileFS(w, r, assets, "index.html")
	})
	mux.HandleFunc("GET /api/workspace", s.serveWorkspace)
	mux.HandleFunc("GET /api/events", s.serveEvents)
	mux.HandleFunc("POST /api/messages", s.serveSay)
	mux.HandleFunc("POST /api/click", s.serveClick)
	mux.HandleFunc("POST /api/files", s.serveAttach)
	mux.HandleFunc("GET /api/files/{id}", s.serveFile)
	return s.guard(mux)
}

func noCache(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		h.ServeHTTP(w, r)
	})
}

// guard keeps other web pages out of the workspace: only loopback Host
// names and Config.Hosts are served, whatever the bind address (against DNS
// rebinding; in a container the sandbox binds 0.0.0.0 and is reached as
// localhost), and writes must be same-origin JSON.
func (s *Sandbox) guard(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.hostAllowed(r.Host) {
			http.Error(w, "sandbox: unexpected Host header (add it to MARLOWE_SANDBOX_HOSTS if it is yours)", http.StatusMisdirectedRequest)
			return
		}
		if r.Method == http.MethodPost {
			if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
				http.Error(w, "sandbox: cross-site request refused", http.StatusForbidden)
				return
			}
			if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
				http.Error(w, "sandbox: want application/json", http.StatusUnsupportedMediaType)
				return
			}
			limit := int64(maxBody)
			if r.URL.Path == "/api/files" {
				limit = maxAttachBody
			}
			r.Body = http.MaxBytesReader(w, r.Body, limit)
		}
		h.ServeHTTP(w, r)
	})
}

// workspaceView is the directory as the page needs it.
type workspaceView struct {
	Epoch      string    `json:"epoch"`
	Bot        Member    `json:"bot"`
	People     []Member  `json:"people"`
	Groups     []Group   `json:"groups"`
	Broadcasts []string  `json:"broadcasts"`
	Channels   []Channel `json:"channels"`
}

func (s *Sandbox) serveWorkspace(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	epoch := s.epoch
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, workspaceView{
		Epoch: epoch, Bot: s.dir.bot, People: s.dir.people, Groups: s.dir.groups,
		Broadcasts: s.dir.broadcasts, Channels: s.dir.channels,
	})
}

func (s *Sandbox) serveSay(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Person  string   `json:"person"`
		Channel string   `json:"channel"`
		Thread  string   `json:"thread"`
		Text    string   `json:"text"`
		Files   []string `json:"files"` // ids from POST /api/files
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeError(w, fmt.Errorf("decode message: %w: %w", errBadRequest, err))
		return
	}
	files, err := s.filesOf(req.Files)
	if err != nil {
		writeError(w, err)
		return
	}
	m, err := s.sayWith(req.Person, req.Channel, req.Thread, req.Text, files)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, m)
}

func (s *Sandbox) serveClick(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Person  string `json:"person"`
		Message string `json:"message"`
		Action  string `json:"action"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeError(w, fmt.Errorf("decode click: %w: %w", errBadRequest, err))
		return
	}
	c, err := s.click(req.Person, req.Message, req.Action)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]string{"card": c.Card, "action": c.Action})
}

// serveEvents streams message changes as Server-Sent Events. The event id
// is the message's revision; a client reconnecting with Last-Event-ID (or
// ?last=N) gets the current state of every message changed after it, each
// once, in revision order, then live changes.
func (s *Sandbox) serveEvents(w http.ResponseWriter, r *http.Request) {
	last, _ := strconv.ParseInt(cmp.Or(r.Header.Get("Last-Event-ID"), r.URL.Query().Get("last")), 10, 64)
	wake := make(chan struct{}, 1)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		http.Error(w, "sandbox: shutting down", http.StatusServiceUnavailable)
		return
	}
	s.streams.Add(1)
	defer s.streams.Done()
	s.subs[wake] = struct{}{}
	epoch, seq := s.epoch, s.seq
	// Typing events only when there is, or comes to be, an indicator.
	typingRev := s.typingRev
	if len(s.typing) > 0 {
		typingRev = -1
	}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.subs, wake)
		s.mu.Unlock()
	}()
	if last < 0 || last > seq {
		last = 0 // another epoch's counter: start over (the hello tells the page)
	}

	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{})
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	hello, _ := json.Marshal(map[string]any{"epoch": epoch, "seq": seq})
	if _, err := fmt.Fprintf(w, "retry: 1000\nevent: hello\ndata: %s\n\n", hello); err != nil {
		return
	}
	tick := time.NewTicker(heartbeat)
	defer tick.Stop()
	for {
		if views, rev, changed := s.typingSince(typingRev); changed {
			data, _ := json.Marshal(views)
			if _, err := fmt.Fprintf(w, "event: typing\ndata: %s\n\n", data); err != nil {
				return
			}
			typingRev = rev
		}
		for _, m := range s.changedSince(last) {
			data, err := json.Marshal(m)
			if err != nil {
				s.log.Error("sandbox: encode event", "message", m.ID, "err", err)
				continue
			}
			if _, err := fmt.Fprintf(w, "id: %d\nevent: message\ndata: %s\n\n", m.Rev, data); err != nil {
				return
			}
			last = m.Rev
		}
		if err := rc.Flush(); err != nil {
			return
		}
		select {
		case <-r.Context().Done():
			return
		case <-s.closing:
			return
		case <-wake:
		case <-tick.C:
			if _, err := fmt.Fprint(w, ": ping\n\n"); err != nil {
				return
			}
		}
	}
}

// changedSince returns copies of the messages whose revision is after rev,
// in revision order.
func (s *Sandbox) changedSince(rev int64) []message {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []message
	for _, m := range s.msgs {
		if m.Rev > rev {
			out = append(out, *m)
		}
	}
	slices.SortFunc(out, func(a, b message) int { return cmp.Compare(a.Rev, b.Rev) })
	return out
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, err error) {
	status := http.StatusInternalServerError
	switch {
	case errors.Is(err, errBadRequest):
		status = http.StatusBadRequest
	case errors.Is(err, ErrNotFound):
		status = http.StatusNotFound
	case errors.Is(err, errForbidden):
		status = http.StatusForbidden
	case errors.Is(err, errConflict):
		status = http.StatusConflict
	case errors.Is(err, errBusy):
		status = http.StatusServiceUnavailable
	}
	writeJSON(w, status, map[string]string{"error": err.Error()})
}
