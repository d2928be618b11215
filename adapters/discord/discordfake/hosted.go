package discordfake

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
)

// hostedFiles are the files people shared, served as Discord's CDN serves
// attachments: at a signed URL (ex, is, hm) that expires; a URL whose
// signature does not verify gets 403, as on the real CDN.
type hostedFiles struct {
	mu        sync.Mutex
	seq       int
	byPath    map[string][]byte
	downloads map[string]int
}

// cdnKey signs the fake's attachment URLs.
var cdnKey = []byte("discordfake-cdn")

func cdnSig(path, ex string) string {
	m := hmac.New(sha256.New, cdnKey)
	m.Write([]byte(path + "?" + ex))
	return hex.EncodeToString(m.Sum(nil))
}

// HostFile stores content as a file a person attached in channel and
// returns the attachment object a MESSAGE_CREATE carries (Msg.Attachments).
func (s *Server) HostFile(channel, name, contentType string, content []byte) map[string]any {
	h := &s.hosted
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.byPath == nil {
		h.byPath, h.downloads = map[string][]byte{}, map[string]int{}
	}
	h.seq++
	id := fmt.Sprintf("1300000000000%06d", h.seq)
	path := "/attachments/" + channel + "/" + id + "/" + name
	h.byPath[path] = content
	ex := "7fffffff"
	u := s.srv.URL + path + "?ex=" + ex + "&is=00000000&hm=" + cdnSig(path, ex) + "&"
	a := map[string]any{"id": id, "filename": name, "size": len(content), "url": u, "proxy_url": u}
	if contentType != "" {
		a["content_type"] = contentType
	}
	return a
}

// Downloads is how many times the attachment id was served.
func (s *Server) Downloads(id string) int {
	h := &s.hosted
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.downloads[id]
}

func (s *Server) serveHosted(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if !hmac.Equal([]byte(q.Get("hm")), []byte(cdnSig(r.URL.Path, q.Get("ex")))) {
		http.Error(w, "This content is no longer available.", http.StatusForbidden)
		return
	}
	h := &s.hosted
	h.mu.Lock()
	b, ok := h.byPath[r.URL.Path]
	if ok {
		// /attachments/<channel>/<id>/<name>
		if seg := strings.Split(r.URL.Path, "/"); len(seg) >= 4 {
			h.downloads[seg[3]]++
		}
	}
	h.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	_, _ = w.Write(b)
}
