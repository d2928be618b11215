package slackfake

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// hosted is the fake's store of files people shared: what
// url_private_download serves, by file id.
type hosted struct {
	byID      map[string][]byte
	downloads map[string]int
}

// HostFile stores content as a file a person shared and returns its entry
// as a message event's "files" element carries it (id, name, mimetype,
// size, url_private_download on the fake's own host). Downloading it needs
// the bot token; another token gets 403.
func (s *Server) HostFile(name, mimetype string, content []byte) map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hosted.byID == nil {
		s.hosted.byID, s.hosted.downloads = map[string][]byte{}, map[string]int{}
	}
	id := fmt.Sprintf("FH%05d", len(s.hosted.byID)+1)
	s.hosted.byID[id] = content
	base := s.srv.URL + "/files-pri/T000-" + id
	return map[string]any{
		"id": id, "name": name, "title": name, "mimetype": mimetype, "size": len(content),
		"mode": "hosted", "is_external": false,
		"url_private":          base + "/" + name,
		"url_private_download": base + "/download/" + name,
	}
}

// Downloads is how many times the file id was served.
func (s *Server) Downloads(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hosted.downloads[id]
}

// serveHosted serves /files-pri/<team>-<id>/download/<name> to the bot
// token only.
func (s *Server) serveHosted(w http.ResponseWriter, r *http.Request) {
	if !s.botTokenOK(strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")) {
		http.Error(w, "forbidden", http.StatusForbidden)
		return
	}
	if s.cfg.Scopes != nil && !slices.Contains(s.cfg.Scopes, "files:read") {
		// What Slack does for a token without files:read: the sign-in
		// page, with 200.
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte("<!DOCTYPE html><html><head><title>Slack</title></head><body>Sign in to your workspace</body></html>"))
		return
	}
	seg := strings.Split(strings.TrimPrefix(r.URL.Path, "/files-pri/"), "/")
	_, id, _ := strings.Cut(seg[0], "-")
	s.mu.Lock()
	b, ok := s.hosted.byID[id]
	if ok {
		s.hosted.downloads[id]++
	}
	s.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.Header().Set("Content-Type", "application/octet-stream")
	_, _ = w.Write(b)
}
