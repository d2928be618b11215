package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"path"
	"strings"
	"unicode/utf8"

	"github.com/marlowe-bot/marlowe/core"
)

// maxSharedFile bounds what the model may generate as one file.
const maxSharedFile = 1 << 20

// shareableTypes are the types the model may write: text it generates
// (tables, notes, diagrams' text). Binary formats are not generated.
var shareableTypes = map[string]bool{
	"text/plain": true, "text/csv": true, "text/markdown": true, "application/json": true,
	"text/yaml": true, "application/yaml": true, "text/x-mermaid": true, "text/vnd.graphviz": true,
	"text/html": true, "text/xml": true, "application/xml": true, "text/tab-separated-values": true,
}

// ShareFile lets the model answer with a file in the run's own thread,
// gated like a reply there (write): the surface uploads it once, keyed
// like a post (core.FileSharer).
func ShareFile() core.Tool {
	return core.Tool{
		Name:        "share_file",
		Description: "Post a file you wrote (a CSV, Markdown, JSON, a diagram's text) in the current thread. Use it when a file serves better than a message.",
		Consequence: core.Write,
		Schema: json.RawMessage(`{"type":"object","properties":{
			"name":{"type":"string","description":"the file name, e.g. report.csv"},
			"type":{"type":"string","description":"MIME type: text/csv, text/markdown, text/plain, application/json, text/yaml, text/x-mermaid, ..."},
			"content":{"type":"string","description":"the whole file content"}},"required":["name","type","content"]}`),
		Run: func(ctx context.Context, tc core.ToolContext, args json.RawMessage) (core.Observation, error) {
			var a struct{ Name, Type, Content string }
			if err := decode(args, &a); err != nil {
				return core.Observation{}, err
			}
			f, err := sharedFile(a.Name, a.Type, a.Content)
			if err != nil {
				return core.Observation{}, err
			}
			fs, ok := tc.Surface.(core.FileSharer)
			if !ok {
				return core.Observation{}, core.ErrNoFileUpload
			}
			if _, err := fs.ShareFile(ctx, f); err != nil {
				return core.Observation{}, fmt.Errorf("share %s: %w", f.Name, err)
			}
			return trusted("Shared %s (%s, %d bytes) in the thread.", f.Name, f.Type, len(f.Content)), nil
		},
	}
}

// sharedFile checks what the model asked to share: a plain file name
// (no path), a text type from the list, UTF-8 content within the bound.
func sharedFile(name, typ, content string) (core.File, error) {
	name = strings.TrimSpace(name)
	base := path.Base(strings.ReplaceAll(name, "\\", "/"))
	if name == "" || base != name || strings.HasPrefix(name, ".") || len(name) > 120 || strings.ContainsAny(name, "\x00\r\n") {
		return core.File{}, fmt.Errorf("name %q: want a plain file name such as report.csv", name)
	}
	mt, _, err := mime.ParseMediaType(strings.TrimSpace(typ))
	if err != nil || !shareableTypes[mt] {
		return core.File{}, fmt.Errorf("type %q: share_file writes text files only (text/csv, text/markdown, text/plain, application/json, text/yaml, text/x-mermaid, ...)", typ)
	}
	switch {
	case content == "":
		return core.File{}, errors.New("content is empty")
	case len(content) > maxSharedFile:
		return core.File{}, fmt.Errorf("content is %d bytes, more than %d", len(content), maxSharedFile)
	case !utf8.ValidString(content):
		return core.File{}, errors.New("content is not UTF-8 text")
	}
	return core.File{Name: name, Title: name, Type: mt, Content: []byte(content)}, nil
}
