package telegramfake

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// hostedFiles are the files people shared, by file id.
type hostedFiles struct {
	byID      map[string][]byte
	downloads map[string]int
	getFiles  map[string]int
}

// HostFile stores content as a file a person shared and returns its
// file_id (also its file_unique_id) for a message's "photo", "document",
// "voice" ... fields. getFile names its path; downloading it needs the
// bot's token in the URL, another token gets 403.
func (s *Server) HostFile(content []byte) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hosted.byID == nil {
		s.hosted.byID, s.hosted.downloads, s.hosted.getFiles = map[string][]byte{}, map[string]int{}, map[string]int{}
	}
	id := fmt.Sprintf("BQACAgFILE%04d", len(s.hosted.byID)+1)
	s.hosted.byID[id] = content
	return id
}

// Downloads is how many times the file was downloaded.
func (s *Server) Downloads(fileID string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hosted.downloads[fileID]
}

func (s *Server) getFile(f map[string][]string) (any, *apiErr) {
	id := ""
	if v := f["file_id"]; len(v) > 0 {
		id = v[0]
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.hosted.byID[id]
	if !ok {
		return nil, &apiErr{code: 400, desc: "Bad Request: invalid file_id"}
	}
	s.hosted.getFiles[id]++
	return map[string]any{"file_id": id, "file_unique_id": id, "file_size": len(b), "file_path": "documents/" + id}, nil
}

// serveFile serves /file/bot<token>/<file_path>.
func (s *Server) serveFile(w http.ResponseWriter, r *http.Request) {
	rest := strings.TrimPrefix(r.URL.Path, "/file/bot")
	tok, path, _ := strings.Cut(rest, "/")
	if tok != s.cfg.Token {
		http.Error(w, "forbidden", http.StatusForbidden)
		return
	}
	id := strings.TrimPrefix(path, "documents/")
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
	_, _ = w.Write(b)
}
