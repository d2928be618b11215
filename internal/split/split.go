// Package split cuts long replies into platform messages without breaking
// Markdown code fences. Platforms count length differently (Slack and
// Discord's first pass in runes, Telegram and Discord's limit in UTF-16 code
// units), so every length goes through a Measure.
package split

import (
	"strings"
	"unicode/utf8"
)

// Measure counts text as a platform counts message length.
type Measure interface {
	// Len is the length of s.
	Len(s string) int
	// Offset is the byte offset in s where n units end, never inside a
	// character; len(s) when s is no longer than n.
	Offset(s string, n int) int
}

// Runes counts Unicode code points.
type Runes struct{}

// Len implements Measure.
func (Runes) Len(s string) int { return utf8.RuneCountInString(s) }

// Offset implements Measure: the byte offset of rune n of s (counting from 0).
func (Runes) Offset(s string, n int) int {
	i := 0
	for off := range s {
		if i == n {
			return off
		}
		i++
	}
	return len(s)
}

// UTF16 counts UTF-16 code units: a character outside the BMP is two.
type UTF16 struct{}

// Len implements Measure.
func (UTF16) Len(s string) int {
	n := 0
	for _, r := range s {
		if r >= 0x10000 {
			n += 2
		} else {
			n++
		}
	}
	return n
}

// Offset implements Measure; a surrogate pair is kept whole.
func (UTF16) Offset(s string, n int) int {
	units := 0
	for off, r := range s {
		w := 1
		if r >= 0x10000 {
			w = 2
		}
		if units+w > n {
			return off
		}
		units += w
	}
	return len(s)
}

// Text cuts s into messages of at most limit units of m (a limit under 64
// counts as 64). It cuts at paragraph boundaries when that keeps a message
// at least half full, else at line boundaries, and inside an over-long line
// at a space.
// A cut inside a ``` code block closes the fence at the end of one message
// and reopens it (with the same info string) at the start of the next, so
// every message renders as well-formed Markdown (and Slack mrkdwn).
func Text(s string, limit int, m Measure) []string {
	if limit < 64 {
		limit = 64
	}
	if m.Len(s) <= limit {
		return []string{s}
	}
	const closer = "```"
	// Room kept for a closing fence ("\n```") and a reopened one.
	lineMax := limit - 2*(len(closer)+1) - 32

	type line struct {
		text    string // including its trailing "\n", if any
		n       int    // units of m
		fence   string // the open fence's opener before this line ("" outside)
		toggles bool   // this line opens or closes a fence
		blank   bool   // a blank line outside any fence
	}
	var lines []line
	fence := ""
	for _, raw := range strings.SplitAfter(s, "\n") {
		if raw == "" {
			continue
		}
		for i, piece := range Cut(raw, lineMax, " \t", m) {
			l := line{text: piece, n: m.Len(piece), fence: fence}
			trimmed := strings.TrimSpace(piece)
			// Only a line's own start can open or close a fence: a later
			// piece of a hard-split long line is mid-line to the platform.
			if i == 0 && strings.HasPrefix(trimmed, closer) && !strings.Contains(trimmed[len(closer):], closer) {
				l.toggles = true
				if fence == "" {
					fence = trimmed
				} else {
					fence = ""
				}
			}
			l.blank = fence == "" && l.fence == "" && trimmed == ""
			lines = append(lines, l)
		}
	}

	var parts []string
	var cur []line
	curLen := 0
	prefix := "" // reopened fence at the start of cur

	// after returns the fence open after cur[:k].
	after := func(k int) string {
		if k == 0 {
			return strings.TrimSpace(prefix)
		}
		l := cur[k-1]
		if l.toggles {
			if l.fence == "" {
				return strings.TrimSpace(l.text)
			}
			return ""
		}
		return l.fence
	}
	emit := func(k int) {
		var b strings.Builder
		b.WriteString(prefix)
		for _, l := range cur[:k] {
			b.WriteString(l.text)
		}
		open := after(k)
		out := b.String()
		if open != "" {
			out = strings.TrimRight(out, "\n") + "\n" + closer
		}
		if t := strings.Trim(out, "\n"); strings.TrimSpace(t) != "" {
			parts = append(parts, t)
		}
		rest := append([]line(nil), cur[k:]...)
		cur = rest
		curLen = 0
		prefix = ""
		if open != "" {
			if m.Len(open) > 24 {
				open = closer // keep the reopened fence short
			}
			prefix = open + "\n"
			curLen = m.Len(prefix)
		}
		for _, l := range cur {
			curLen += l.n
		}
	}

	for _, l := range lines {
		reserve := 0
		if l.fence != "" || l.toggles {
			reserve = len(closer) + 1
		}
		for len(cur) > 0 && curLen+l.n+reserve > limit {
			// Prefer the last paragraph break, if it keeps this message at
			// least half full.
			k, kept := len(cur), curLen
			for i := len(cur); i > 0; i-- {
				kept -= cur[i-1].n
				if cur[i-1].blank {
					if kept+cur[i-1].n >= limit/2 {
						k = i
					}
					break
				}
			}
			emit(k)
		}
		cur = append(cur, l)
		curLen += l.n
	}
	if len(cur) > 0 {
		emit(len(cur))
	}
	return parts
}

// Cut cuts s into pieces of at most n (> 0) units of m. A piece ends just
// after the last of the bytes in breakAt when one falls in its second half,
// else mid-run. A string of at most n units comes back whole.
func Cut(s string, n int, breakAt string, m Measure) []string {
	var out []string
	for m.Len(s) > n {
		cut := m.Offset(s, n)
		if cut == 0 { // n smaller than one character: take the character
			_, cut = utf8.DecodeRuneInString(s)
		}
		if b := strings.LastIndexAny(s[:cut], breakAt); b > cut/2 {
			cut = b + 1
		}
		out = append(out, s[:cut])
		s = s[cut:]
	}
	return append(out, s)
}

// Truncate shortens s to at most n units of m, ending in "…" when cut.
func Truncate(s string, n int, m Measure) string {
	if m.Len(s) <= n {
		return s
	}
	if n <= 1 {
		return "…"
	}
	return s[:m.Offset(s, n-1)] + "…"
}
