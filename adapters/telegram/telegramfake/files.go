package telegramfake

import (
	"io"
	"net/http"
	"net/url"
	"time"
)

// Document is one accepted sendDocument: the uploaded file as received.
type Document struct {
	ChatID    int64
	MessageID int64
	Topic     int64
	Caption   string
	Name      string
	Content   []byte
}

// Documents returns every accepted sendDocument, in order.
func (s *Server) Documents() []Document {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Document(nil), s.docs...)
}

// sendDocument takes a multipart upload with a "document" file part, as
// the Bot API does; form gets its fields, for the call log.
func (s *Server) sendDocument(r *http.Request, form url.Values) (any, *apiErr) {
	if err := r.ParseMultipartForm(10 << 20); err != nil {
		return nil, &apiErr{code: 400, desc: "Bad Request: there is no document in the request"}
	}
	for k, v := range r.MultipartForm.Value {
		form[k] = v
	}
	part, hdr, err := r.FormFile("document")
	if err != nil {
		return nil, &apiErr{code: 400, desc: "Bad Request: there is no document in the request"}
	}
	defer part.Close()
	b, err := io.ReadAll(part)
	if err != nil || len(b) == 0 {
		return nil, &apiErr{code: 400, desc: "Bad Request: file must be non-empty"}
	}
	chat := atoi(form.Get("chat_id"))
	if chat == 0 {
		return nil, &apiErr{code: 400, desc: "Bad Request: chat not found"}
	}
	topic := atoi(form.Get("message_thread_id"))
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextMsg[chat]++
	id := s.nextMsg[chat] + 100
	s.docs = append(s.docs, Document{ChatID: chat, MessageID: id, Topic: topic, Caption: form.Get("caption"), Name: hdr.Filename, Content: b})
	ct := "supergroup"
	if chat > 0 {
		ct = "private"
	}
	return map[string]any{"message_id": id, "from": s.Bot(), "chat": Chat{ID: chat, Type: ct}, "date": time.Now().Unix(),
		"document": map[string]any{"file_name": hdr.Filename, "file_size": len(b)}}, nil
}
