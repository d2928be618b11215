package sandbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/marlowe-bot/marlowe/core"
)

// Files people attach in the composer (the attach button or a drop): the
// page sends each as JSON (name, type, base64 data; the sandbox takes only
// same-origin JSON), gets an id back, and names the ids with the message.
// They are kept beside the data file (<data file>.files/), or in memory
// without one, and served to the engine through core.AttachmentFetcher.

const (
	maxAttachBytes = 20 << 20 // a file the composer takes
	maxAttachBody  = maxAttachBytes*4/3 + 4096
	maxMsgFiles    = 10
)

// fileView is a file on a message, as stored and as the page shows it.
type fileView struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	Type string `json:"type,omitempty"`
	Size int64  `json:"size"`
}

// fileStore holds uploaded files by id.
type fileStore struct {
	mu    sync.Mutex
	dir   string // "" = memory only
	mem   map[string][]byte
	meta  map[string]fileView
	reads map[string]int
}

func (fs *fileStore) put(name, typ string, data []byte) (fileView, error) {
	var rnd [12]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return fileView{}, err
	}
	f := fileView{ID: "SF" + hex.EncodeToString(rnd[:]), Name: name, Type: typ, Size: int64(len(data))}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.mem == nil {
		fs.mem, fs.meta, fs.reads = map[string][]byte{}, map[string]fileView{}, map[string]int{}
	}
	if fs.dir != "" {
		if err := os.MkdirAll(fs.dir, 0o700); err != nil {
			return fileView{}, fmt.Errorf("keep file: %w", err)
		}
		if err := os.WriteFile(filepath.Join(fs.dir, f.ID), data, 0o600); err != nil {
			return fileView{}, fmt.Errorf("keep file: %w", err)
		}
	} else {
		fs.mem[f.ID] = data
	}
	fs.meta[f.ID] = f
	return f, nil
}

func (fs *fileStore) get(id string) ([]byte, error) {
	if !strings.HasPrefix(id, "SF") || strings.ContainsAny(id, `/\.`) {
		return nil, fmt.Errorf("file %q: %w", id, ErrNotFound)
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.reads == nil {
		fs.reads = map[string]int{}
	}
	fs.reads[id]++
	if b, ok := fs.mem[id]; ok {
		return b, nil
	}
	if fs.dir == "" {
		return nil, fmt.Errorf("file %q: %w", id, ErrNotFound)
	}
	b, err := os.ReadFile(filepath.Join(fs.dir, id))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("file %q: %w", id, ErrNotFound)
	}
	return b, err
}

func (fs *fileStore) view(id string) (fileView, bool) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	f, ok := fs.meta[id]
	return f, ok
}

// FileReads is how many times the file id was read (tests).
func (s *Sandbox) FileReads(id string) int {
	s.files.mu.Lock()
	defer s.files.mu.Unlock()
	return s.files.reads[id]
}

// AttachFile stores a file as the composer's upload does and returns its id.
func (s *Sandbox) AttachFile(name, typ string, data []byte) (string, error) {
	f, err := s.attach(name, typ, data)
	return f.ID, err
}

func (s *Sandbox) attach(name, typ string, data []byte) (fileView, error) {
	name = strings.TrimSpace(filepath.Base(strings.ReplaceAll(name, "\\", "/")))
	if name == "" || name == "." || name == "/" || len(name) > 200 || !utf8.ValidString(name) {
		return fileView{}, fmt.Errorf("file name %q: %w", name, errBadRequest)
	}
	if len(data) > maxAttachBytes {
		return fileView{}, fmt.Errorf("file %s is %d bytes, more than the sandbox takes (%d): %w", name, len(data), maxAttachBytes, errBadRequest)
	}
	return s.files.put(name, typ, data)
}

func (s *Sandbox) serveAttach(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Name string `json:"name"`
		Type string `json:"type"`
		Data []byte `json:"data"` // base64 in JSON
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeError(w, fmt.Errorf("decode file: %w: %w", errBadRequest, err))
		return
	}
	f, err := s.attach(req.Name, req.Type, req.Data)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, f)
}

func (s *Sandbox) serveFile(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	f, ok := s.files.view(id)
	b, err := s.files.get(id)
	if !ok || err != nil {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", f.Name))
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write(b)
}

// filesOf resolves the ids a message names.
func (s *Sandbox) filesOf(ids []string) ([]fileView, error) {
	if len(ids) > maxMsgFiles {
		return nil, fmt.Errorf("at most %d files per message: %w", maxMsgFiles, errBadRequest)
	}
	var out []fileView
	for _, id := range ids {
		f, ok := s.files.view(id)
		if !ok {
			return nil, fmt.Errorf("file %q: %w", id, ErrNotFound)
		}
		out = append(out, f)
	}
	return out, nil
}

func attachmentsOf(files []fileView) []core.Attachment {
	var out []core.Attachment
	for _, f := range files {
		out = append(out, core.Attachment{ID: f.ID, Name: f.Name, Type: f.Type, Size: f.Size, Ref: f.ID})
	}
	return out
}

var _ core.AttachmentFetcher = (*Sandbox)(nil)

// FetchAttachment implements core.AttachmentFetcher from the sandbox's own
// store (the reference is a file id, never a URL).
func (s *Sandbox) FetchAttachment(_ context.Context, a core.Attachment, max int64) ([]byte, error) {
	b, err := s.files.get(a.Ref)
	if err != nil {
		return nil, fmt.Errorf("sandbox: file %s: %w", a.ID, err)
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("sandbox: file %s: %w", a.ID, core.ErrAttachmentTooLarge)
	}
	return b, nil
}

// filesDir is where attached files are kept: beside the data file.
func filesDir(dataFile string) string {
	if dataFile == "" {
		return ""
	}
	return dataFile + ".files"
}
