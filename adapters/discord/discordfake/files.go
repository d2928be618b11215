package discordfake

import (
	"bytes"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"strings"
	"sync"
)

// Attachment is one file sent with a message (multipart POST
// /channels/{id}/messages: payload_json and files[n] parts), as received.
type Attachment struct {
	ChannelID string
	MessageID string
	Name      string
	Content   []byte
}

type attachments struct {
	mu   sync.Mutex
	list []Attachment
}

// Attachments returns every file sent with a message, in order.
func (s *Server) Attachments() []Attachment {
	s.files.mu.Lock()
	defer s.files.mu.Unlock()
	return append([]Attachment(nil), s.files.list...)
}

type upload struct {
	name    string
	content []byte
}

// splitMultipart returns a multipart body's payload_json (the message, as
// a JSON body would carry it) and its file parts; other bodies pass as they are.
func splitMultipart(r *http.Request, body []byte) ([]byte, []upload) {
	mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/form-data" {
		return body, nil
	}
	mr := multipart.NewReader(bytes.NewReader(body), params["boundary"])
	var payload []byte
	var ups []upload
	for {
		p, err := mr.NextPart()
		if err != nil {
			break
		}
		b, _ := io.ReadAll(p)
		switch name := p.FormName(); {
		case name == "payload_json":
			payload = b
		case strings.HasPrefix(name, "files["):
			ups = append(ups, upload{name: p.FileName(), content: b})
		}
	}
	return payload, ups
}

// recordFiles keeps the files of a created message.
func (s *Server) recordFiles(out any, ups []upload) {
	m, ok := out.(map[string]any)
	if !ok || len(ups) == 0 {
		return
	}
	id, _ := m["id"].(string)
	ch, _ := m["channel_id"].(string)
	s.files.mu.Lock()
	defer s.files.mu.Unlock()
	for _, u := range ups {
		s.files.list = append(s.files.list, Attachment{ChannelID: ch, MessageID: id, Name: u.name, Content: u.content})
	}
}
