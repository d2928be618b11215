package connectors

import (
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A result whose structuredContent repeats its text (the spec's
// backward-compatible JSON copy, or server-filesystem's {"content": text})
// reaches the model once; anything that adds to the text is kept.
func TestStructuredContentIsNotSentTwice(t *testing.T) {
	text := func(s string) mcp.Content { return &mcp.TextContent{Text: s} }
	cases := []struct {
		name       string
		content    []mcp.Content
		structured any
		want       string
	}{
		{"the spec's JSON copy", []mcp.Content{text(`{"temperature":22,"conditions":"Sunny"}`)},
			map[string]any{"conditions": "Sunny", "temperature": 22}, `structuredContent: {"conditions":"Sunny","temperature":22}`},
		{"the copy spaced and in another key order", []mcp.Content{text("{\n  \"b\": [1, 2],\n  \"a\": \"x\"\n}")},
			map[string]any{"a": "x", "b": []any{1, 2}}, `structuredContent: {"a":"x","b":[1,2]}`},
		{"server-filesystem's wrapper", []mcp.Content{text("line one\nline two\n")},
			map[string]any{"content": "line one\nline two\n"}, "line one\nline two\n"},
		{"a wrapper of other text", []mcp.Content{text("file A")},
			map[string]any{"content": "file B"}, "file A\nstructuredContent: {\"content\":\"file B\"}"},
		{"two fields", []mcp.Content{text("done")},
			map[string]any{"content": "done", "id": "7"}, "done\nstructuredContent: {\"content\":\"done\",\"id\":\"7\"}"},
		{"other JSON in the text", []mcp.Content{text(`{"answer":41}`)},
			map[string]any{"answer": 42}, "{\"answer\":41}\nstructuredContent: {\"answer\":42}"},
		{"no structured content", []mcp.Content{text(`{"answer":42}`)}, nil, `{"answer":42}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			obs, err := observe("s__t", &mcp.CallToolResult{Content: c.content, StructuredContent: c.structured}, DefaultResultCap)
			if err != nil {
				t.Fatal(err)
			}
			if obs.Text != c.want {
				t.Errorf("observation %q, want %q", obs.Text, c.want)
			}
		})
	}
	// Once, a file of 7,000 bytes fits the cap whole, and is not said cut.
	file := strings.Repeat("0123456789abcde\n", 7000/16)
	obs, err := observe("fs__read_text_file", &mcp.CallToolResult{Content: []mcp.Content{text(file)}, StructuredContent: map[string]any{"content": file}}, DefaultResultCap)
	if err != nil || obs.Text != file {
		t.Errorf("a 7,000-byte file: %d bytes, cut: %v, %v", len(obs.Text), strings.Contains(obs.Text, "result cut"), err)
	}
}
