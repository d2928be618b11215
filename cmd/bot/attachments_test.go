package main

import (
	"bytes"
	"context"
	"encoding/json"
	"image"
	_ "image/png"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/attachments/attachmentstest"
	"github.com/marlowe-bot/marlowe/core/coretest"
	"github.com/marlowe-bot/marlowe/llm/llmtest"
)

// `bot serve` with the sandbox and an OpenAI-compatible model: a
// screenshot and a CSV attached in the composer reach the model as an
// image_url part (scaled to a 1568 px long side) and fenced text, and the
// image is kept in the data directory's blob store.
func TestServeSandboxFilesReachTheModel(t *testing.T) {
	t.Parallel()
	base, model, dir := serveSandboxWithModel(t)
	post := func(path string, body any) map[string]any {
		t.Helper()
		b, _ := json.Marshal(body)
		resp, err := http.Post(base+path, "application/json", bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("POST %s: %d %v", path, resp.StatusCode, out)
		}
		return out
	}
	shot := post("/api/files", map[string]any{"name": "error.png", "type": "image/png", "data": attachmentstest.Screenshot(t, 2000, 1000)})
	csv := post("/api/files", map[string]any{"name": "orders.csv", "type": "text/csv", "data": attachmentstest.CSV(30)})
	post("/api/messages", map[string]any{"person": "alice", "channel": "general", "text": "<@marlowe> what is wrong here?", "files": []any{shot["id"], csv["id"]}})

	img, text := imageCall(t, model)
	cfg, format, err := image.DecodeConfig(bytes.NewReader(img.Data))
	if err != nil || format != "png" || cfg.Width != 1568 || cfg.Height != 784 || img.Type != "image/png" {
		t.Errorf("image part %s %s %dx%d (%v)", img.Type, format, cfg.Width, cfg.Height, err)
	}
	if !strings.Contains(text, "1017,cust17") || !strings.Contains(text, `name="orders.csv"`) {
		t.Errorf("the files message lacks the CSV:\n%s", text)
	}
	blobs, _ := filepath.Glob(filepath.Join(dir, "blobs", "*", "*"))
	if len(blobs) != 1 {
		t.Errorf("blobs in the data dir: %v", blobs)
	} else if b, _ := os.ReadFile(blobs[0]); !bytes.Equal(b, img.Data) {
		t.Error("the kept blob is not the image the model got")
	}
}

// serveSandboxWithModel runs `bot serve` with the sandbox and an
// OpenAI-compatible fake model; it returns the sandbox's URL (no trailing
// slash), the fake and the data directory.
func serveSandboxWithModel(t *testing.T) (string, *llmtest.OpenAIServer, string) {
	t.Helper()
	model := llmtest.NewOpenAIServer(t)
	dir := t.TempDir()
	getenv := env(map[string]string{
		"MARLOWE_DATA_DIR": dir, "MARLOWE_HTTP_ADDR": "127.0.0.1:0", "MARLOWE_SANDBOX_ADDR": "127.0.0.1:0",
		"MARLOWE_MODEL_PROVIDER": "openai", "MARLOWE_MODEL": "fake-model", "MARLOWE_MODEL_BASE_URL": model.URL,
	})
	ctx, cancel := context.WithCancel(context.Background())
	logs := newLogWatch("sandbox ready")
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"serve"}, getenv, strings.NewReader(""), io.Discard, logs) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("serve: %v", err)
			}
		case <-time.After(15 * time.Second):
			t.Error("serve did not stop")
		}
	})
	select {
	case err := <-done:
		t.Fatalf("serve stopped: %v\n%s", err, logs)
	case <-logs.seen:
	case <-time.After(30 * time.Second):
		t.Fatalf("serve did not start:\n%s", logs)
	}
	m := regexp.MustCompile(`sandbox ready.*url=(http://127\.0\.0\.1:\d+)/`).FindStringSubmatch(logs.String())
	if m == nil {
		t.Fatalf("no sandbox URL:\n%s", logs)
	}
	return m[1], model, dir
}

// imageCall awaits a model call carrying one image part and returns the
// image and the text of its message.
func imageCall(t *testing.T, model *llmtest.OpenAIServer) (llmtest.Image, string) {
	t.Helper()
	var img llmtest.Image
	var text string
	coretest.WaitFor(t, 20*time.Second, "a model call with the image", func() bool {
		reqs, _ := model.ChatRequests()
		for _, r := range reqs {
			for _, msg := range r.Messages {
				if ims := msg.Images(); len(ims) == 1 {
					img, text = ims[0], msg.Text()
					return true
				}
			}
		}
		return false
	})
	return img, text
}
