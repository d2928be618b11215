package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/marlowe-bot/marlowe/core"
)

// The composer's attach path: a file is uploaded as JSON, named by id
// with a message that has no text, delivered as an attachment on the
// event, shown on the message, fetched back by the engine (and kept
// beside the data file); an oversized or unknown file is refused.
func TestComposerAttachesFiles(t *testing.T) {
	dir := t.TempDir()
	s := newSandbox(t, Config{DataFile: filepath.Join(dir, "sandbox.jsonl")})
	rec := newRecorder()
	base := run(t, s, rec.deliver)
	csv := []byte("name,qty\nbolts,4\n")
	code, body := postJSON(t, base+"/api/files", map[string]any{"name": "stock.csv", "type": "text/csv", "data": csv})
	if code != http.StatusCreated {
		t.Fatalf("upload: %d %s", code, body)
	}
	var f fileView
	if err := json.Unmarshal(body, &f); err != nil || f.ID == "" || f.Size != int64(len(csv)) {
		t.Fatalf("upload answered %s (%v)", body, err)
	}
	code, body = postJSON(t, base+"/api/messages", map[string]any{"person": "alice", "channel": "general", "text": "", "files": []string{f.ID}})
	if code != http.StatusCreated {
		t.Fatalf("say with a file: %d %s", code, body)
	}
	ev := rec.nextEvent(t)
	if len(ev.Attachments) != 1 || ev.Attachments[0].Name != "stock.csv" || ev.Attachments[0].Type != "text/csv" || ev.Text != "" {
		t.Fatalf("event %+v", ev)
	}
	got, err := s.FetchAttachment(context.Background(), ev.Attachments[0], 1<<20)
	if err != nil || !bytes.Equal(got, csv) {
		t.Fatalf("fetch: %v %q", err, got)
	}
	if _, err := s.FetchAttachment(context.Background(), ev.Attachments[0], 4); !errors.Is(err, core.ErrAttachmentTooLarge) {
		t.Errorf("past the cap: %v", err)
	}
	if m, ok := findMessage(s, func(m message) bool { return len(m.Files) == 1 }); !ok || m.Files[0].ID != f.ID {
		t.Errorf("the message does not show its file: %+v", m)
	}
	resp, err := http.Get(base + "/api/files/" + f.ID)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Disposition") == "" {
		t.Errorf("download: %d %v", resp.StatusCode, resp.Header)
	}
	// Refused: an unknown id, no text and no file, a file past the cap.
	if code, _ := postJSON(t, base+"/api/messages", map[string]any{"person": "alice", "channel": "general", "text": "x", "files": []string{"SFnope"}}); code != http.StatusNotFound {
		t.Errorf("unknown file id: %d", code)
	}
	if code, _ := postJSON(t, base+"/api/messages", map[string]any{"person": "alice", "channel": "general", "text": " "}); code != http.StatusBadRequest {
		t.Errorf("empty message: %d", code)
	}
	if code, _ := postJSON(t, base+"/api/files", map[string]any{"name": "big.bin", "data": make([]byte, maxAttachBytes+1)}); code == http.StatusCreated {
		t.Errorf("oversized upload accepted")
	}
	// Kept beside the data file: a new sandbox on it reads the file back.
	s2 := newSandbox(t, Config{DataFile: filepath.Join(dir, "sandbox.jsonl")})
	if got, err := s2.FetchAttachment(context.Background(), ev.Attachments[0], 1<<20); err != nil || !bytes.Equal(got, csv) {
		t.Errorf("after a restart: %v", err)
	}
}
