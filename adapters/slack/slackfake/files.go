package slackfake

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
)

// File is a file shared through Slack's external upload
// (files.getUploadURLExternal, a POST of the bytes to the upload URL,
// files.completeUploadExternal), as the fake recorded it.
type File struct {
	ID       string
	Name     string
	Title    string
	Channel  string
	ThreadTS string
	Content  []byte
}

// files is the fake's upload state: reserved uploads by file id, and the
// completed files in order.
type files struct {
	mu      sync.Mutex
	seq     int
	pending map[string]*File
	length  map[string]int
	done    []File
}

// Files returns the files completed so far.
func (s *Server) Files() []File {
	s.files.mu.Lock()
	defer s.files.mu.Unlock()
	return append([]File(nil), s.files.done...)
}

// getUploadURL reserves an upload: the file's name and declared length.
func (s *Server) getUploadURL(r apiReq) any {
	name := r.form.Get("filename")
	n, err := strconv.Atoi(r.form.Get("length"))
	if name == "" || err != nil || n <= 0 {
		return fail("invalid_arguments")
	}
	fs := &s.files
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.pending == nil {
		fs.pending, fs.length = map[string]*File{}, map[string]int{}
	}
	fs.seq++
	id := fmt.Sprintf("F%06d", fs.seq)
	fs.pending[id], fs.length[id] = &File{ID: id, Name: name}, n
	return map[string]any{"ok": true, "file_id": id, "upload_url": s.srv.URL + "/upload/" + id}
}

// serveUpload takes the bytes of a reserved upload: a multipart form with
// a "file" part, as slack-go sends it, of the declared length.
func (s *Server) serveUpload(w http.ResponseWriter, r *http.Request) {
	id := strings.TrimPrefix(r.URL.Path, "/upload/")
	if !s.botTokenOK(strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")) {
		http.Error(w, "invalid_auth", http.StatusUnauthorized)
		return
	}
	part, _, err := r.FormFile("file")
	if err != nil {
		http.Error(w, "no file part", http.StatusBadRequest)
		return
	}
	defer part.Close()
	b, err := io.ReadAll(io.LimitReader(part, 10<<20))
	if err != nil {
		http.Error(w, "bad body", http.StatusBadRequest)
		return
	}
	fs := &s.files
	fs.mu.Lock()
	f, ok := fs.pending[id]
	if ok && len(b) == fs.length[id] {
		f.Content = b
	}
	fs.mu.Unlock()
	switch {
	case !ok:
		http.Error(w, "unknown upload", http.StatusNotFound)
	case len(b) != fs.length[id]:
		http.Error(w, "length does not match", http.StatusBadRequest)
	default:
		w.WriteHeader(http.StatusOK)
	}
}

// completeUpload shares uploaded files into channel_id (thread_ts).
func (s *Server) completeUpload(r apiReq) any {
	var want []struct {
		ID    string `json:"id"`
		Title string `json:"title"`
	}
	if err := json.Unmarshal([]byte(r.form.Get("files")), &want); err != nil || len(want) == 0 {
		return fail("invalid_arguments")
	}
	ch := r.form.Get("channel_id")
	if ch == "" {
		return fail("channel_not_found")
	}
	fs := &s.files
	fs.mu.Lock()
	defer fs.mu.Unlock()
	var out []map[string]any
	for _, w := range want {
		f, ok := fs.pending[w.ID]
		if !ok || f.Content == nil {
			return fail("file_not_found")
		}
		delete(fs.pending, w.ID)
		f.Title, f.Channel, f.ThreadTS = w.Title, ch, r.form.Get("thread_ts")
		fs.done = append(fs.done, *f)
		out = append(out, map[string]any{"id": f.ID, "title": f.Title})
	}
	return map[string]any{"ok": true, "files": out}
}
