package attachments

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"strings"
	"time"
)

// Transcriber turns speech into text.
type Transcriber interface {
	Transcribe(ctx context.Context, name, mime string, audio []byte) (string, error)
}

// Whisper is a client of an OpenAI-compatible /v1/audio/transcriptions
// endpoint (OpenAI, Groq, a local whisper.cpp or faster-whisper server):
// MARLOWE_TRANSCRIBE_BASE_URL and MARLOWE_TRANSCRIBE_MODEL.
type Whisper struct {
	// BaseURL is up to and including /v1 ("https://api.openai.com/v1").
	BaseURL string
	Model   string
	APIKey  string
	Client  *http.Client
	Timeout time.Duration
}

// Transcribe posts the audio as multipart form data (file, model,
// response_format=json) and returns the "text" of the answer.
func (w *Whisper) Transcribe(ctx context.Context, name, mime string, audio []byte) (string, error) {
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	_ = mw.WriteField("model", w.Model)
	_ = mw.WriteField("response_format", "json")
	fw, err := mw.CreateFormFile("file", name)
	if err != nil {
		return "", err
	}
	if _, err := fw.Write(audio); err != nil {
		return "", err
	}
	if err := mw.Close(); err != nil {
		return "", err
	}
	timeout := w.Timeout
	if timeout <= 0 {
		timeout = 2 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	url := strings.TrimRight(w.BaseURL, "/") + "/audio/transcriptions"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, &body)
	if err != nil {
		return "", fmt.Errorf("transcribe: %w", err)
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	if w.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+w.APIKey)
	}
	c := w.Client
	if c == nil {
		c = http.DefaultClient
	}
	resp, err := c.Do(req)
	if err != nil {
		return "", fmt.Errorf("transcribe at %s: %w", req.URL.Host, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("transcribe at %s: HTTP %d: %s", req.URL.Host, resp.StatusCode, strings.TrimSpace(string(raw[:min(len(raw), 200)])))
	}
	var got struct {
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &got); err != nil {
		return "", fmt.Errorf("transcribe at %s: decode answer: %w", req.URL.Host, err)
	}
	return strings.TrimSpace(got.Text), nil
}
