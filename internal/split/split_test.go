package split_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/marlowe-bot/marlowe/internal/split"
)

func TestTextProperties(t *testing.T) {
	for _, m := range []struct {
		name string
		m    split.Measure
	}{{"runes", split.Runes{}}, {"utf16", split.UTF16{}}} {
		t.Run(m.name, func(t *testing.T) { testTextProperties(t, m.m) })
	}
}

func testTextProperties(t *testing.T, m split.Measure) {
	para := strings.Repeat("word ", 60) + "\n"
	var b strings.Builder
	for i := range 12 {
		b.WriteString(para)
		b.WriteString("\n")
		if i%4 == 1 {
			b.WriteString("```python\n")
			for j := range 25 {
				b.WriteString("print('line " + strings.Repeat("x", j%7) + "')\n")
			}
			b.WriteString("```\n\n")
		}
	}
	b.WriteString(strings.Repeat("y", 2500)) // one very long line
	b.WriteString("\n" + strings.Repeat("🙂", 700))
	text := b.String()
	for _, limit := range []int{200, 500, 1000, 3500} {
		parts := split.Text(text, limit, m)
		if len(parts) < 2 {
			t.Fatalf("limit %d: %d parts", limit, len(parts))
		}
		var rebuilt strings.Builder
		for i, p := range parts {
			if n := m.Len(p); n > limit {
				t.Fatalf("limit %d: part %d has %d units", limit, i, n)
			}
			if strings.Count(p, "```")%2 != 0 {
				t.Fatalf("limit %d: part %d unbalanced fence:\n%s", limit, i, p)
			}
			rebuilt.WriteString(p)
		}
		// Nothing but whitespace and fence markers is added or lost.
		strip := func(s string) string {
			s = strings.ReplaceAll(s, "```python", "")
			s = strings.ReplaceAll(s, "```", "")
			return strings.Join(strings.Fields(s), "")
		}
		if strip(rebuilt.String()) != strip(text) {
			t.Fatalf("limit %d: content changed", limit)
		}
	}
	if got := split.Text("short", 3500, m); len(got) != 1 || got[0] != "short" {
		t.Fatalf("short text: %q", got)
	}
}

func TestTextPrefersParagraphs(t *testing.T) {
	p1 := strings.Repeat("a", 150)
	p2 := strings.Repeat("b", 150)
	parts := split.Text(p1+"\n\n"+p2+"\nmore", 200, split.Runes{})
	if len(parts) != 2 || parts[0] != p1 || !strings.HasPrefix(parts[1], p2) {
		t.Fatalf("parts = %q", parts)
	}
	// Code fence reopened with its info string.
	code := "intro\n```go\n" + strings.Repeat("x := 1\n", 60) + "```\nafter"
	parts = split.Text(code, 120, split.Runes{})
	for i, p := range parts[1:] {
		if strings.Contains(p, "x := 1") && !strings.HasPrefix(p, "```go\n") {
			t.Fatalf("part %d does not reopen the fence: %q", i+1, p)
		}
	}
	// Multi-byte text is cut at rune boundaries.
	for _, p := range split.Text(strings.Repeat("é漢🙂", 500), 100, split.Runes{}) {
		if !utf8.ValidString(p) || utf8.RuneCountInString(p) > 100 {
			t.Fatalf("bad part %q", p)
		}
	}
}

// A hard-split piece of an over-long line that happens to begin with ```
// is mid-line to the platform: it must not flip the splitter's idea of being in a
// code block (which would add closers and reopeners around plain text).
func TestTextHardSplitPieceDoesNotToggleFence(t *testing.T) {
	const limit = 3500
	lineMax := limit - 2*(len("```")+1) - 32
	long := strings.Repeat("a", lineMax) + "```" + strings.Repeat("b", 100) + "\n"
	var sb strings.Builder
	sb.WriteString(long)
	for range 80 {
		sb.WriteString("plain prose line that is not code at all\n")
	}
	parts := split.Text(sb.String(), limit, split.Runes{})
	if len(parts) < 2 {
		t.Fatalf("%d parts", len(parts))
	}
	if n := strings.Count(strings.Join(parts, "\n"), "```"); n != 1 {
		t.Fatalf("%d fence markers in the output, want only the original one:\n%q", n, parts)
	}
}

func TestTextUTF16Units(t *testing.T) {
	for _, tc := range []struct {
		text  string
		limit int
	}{
		{strings.Repeat("😀", 5000), 4096},
		{strings.Repeat("a", 4096), 4096},
		{strings.Repeat("a", 4097), 4096},
		{strings.Repeat("é", 9000), 4096},
		{strings.Repeat("😀 x\n\n", 2000), 100},
	} {
		parts := split.Text(tc.text, tc.limit, split.UTF16{})
		total := 0
		for _, p := range parts {
			if n := u16len(p); n > tc.limit {
				t.Errorf("part of %d units over %d", n, tc.limit)
			}
			if strings.ContainsRune(p, '\uFFFD') {
				t.Error("a surrogate pair was cut")
			}
			total += strings.Count(p, "😀") + strings.Count(p, "a") + strings.Count(p, "é")
		}
		want := strings.Count(tc.text, "😀") + strings.Count(tc.text, "a") + strings.Count(tc.text, "é")
		if total != want {
			t.Errorf("lost characters: %d of %d", total, want)
		}
		if u16len(tc.text) <= tc.limit && len(parts) != 1 {
			t.Errorf("a text that fits was split")
		}
	}
}

func TestCutAndTruncate(t *testing.T) {
	for _, tc := range []struct {
		name    string
		m       split.Measure
		s       string
		n       int
		breakAt string
		want    []string
	}{
		{"fits", split.Runes{}, "abc", 3, " ", []string{"abc"}},
		{"at space", split.Runes{}, "aaa bbb ccc", 8, " ", []string{"aaa bbb ", "ccc"}},
		{"mid-run", split.Runes{}, "abcdefgh", 3, " ", []string{"abc", "def", "gh"}},
		{"runes count astral once", split.Runes{}, "🙂🙂🙂", 2, " ", []string{"🙂🙂", "🙂"}},
		{"utf16 counts astral twice", split.UTF16{}, "🙂🙂🙂", 4, " ", []string{"🙂🙂", "🙂"}},
		{"utf16 keeps a pair whole", split.UTF16{}, "a🙂b", 2, " ", []string{"a", "🙂", "b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := split.Cut(tc.s, tc.n, tc.breakAt, tc.m)
			if strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Fatalf("Cut(%q, %d) = %q, want %q", tc.s, tc.n, got, tc.want)
			}
		})
	}
	for _, tc := range []struct {
		m    split.Measure
		s    string
		n    int
		want string
	}{
		{split.Runes{}, "hello", 5, "hello"},
		{split.Runes{}, "hello", 4, "hel…"},
		{split.Runes{}, "hello", 1, "…"},
		{split.Runes{}, "🙂🙂🙂", 2, "🙂…"},
		{split.UTF16{}, "🙂🙂🙂", 4, "🙂…"},
		{split.UTF16{}, "a🙂🙂", 3, "a…"},
	} {
		if got := split.Truncate(tc.s, tc.n, tc.m); got != tc.want || !utf8.ValidString(got) {
			t.Errorf("Truncate(%q, %d) = %q, want %q", tc.s, tc.n, got, tc.want)
		}
	}
}

func u16len(s string) int { return split.UTF16{}.Len(s) }
