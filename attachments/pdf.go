package attachments

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/ledongthuc/pdf"
)

// pdfText extracts the text layer of at most maxPages pages, stopping
// once maxText bytes are gathered. It reports how many pages the PDF has
// and how many were read. The library panics on some malformed files;
// that is an error here, never a crash.
func pdfText(b []byte, maxPages, maxText int) (text string, pages, read int, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("malformed PDF: %v", r)
		}
	}()
	r, err := pdf.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		return "", 0, 0, fmt.Errorf("open PDF: %w", err)
	}
	pages = r.NumPage()
	var sb strings.Builder
	for i := 1; i <= pages && i <= maxPages && sb.Len() < maxText; i++ {
		p := r.Page(i)
		read = i
		if p.V.IsNull() {
			continue
		}
		t, perr := p.GetPlainText(nil)
		if perr != nil {
			continue // one unreadable page does not lose the others
		}
		if t = strings.TrimSpace(t); t != "" {
			fmt.Fprintf(&sb, "--- page %d ---\n%s\n", i, t)
		}
	}
	return sb.String(), pages, read, nil
}
