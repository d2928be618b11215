package discord

import (
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// splitMessage cuts s into Discord messages of at most limit characters as
// Discord counts them (UTF-16 code units: an emoji outside the BMP is two),
// code fences kept whole per message.
func splitMessage(s string, limit int) []string {
	var out []string
	for _, p := range splitText(s, limit) {
		n := utf16Len(p)
		if n <= limit {
			out = append(out, p)
			continue
		}
		// Astral characters made a part too long: split it again, tighter.
		tighter := limit * utf8.RuneCountInString(p) / n
		out = append(out, splitMessage(p, max(tighter-8, 64))...)
	}
	return out
}

func utf16Len(s string) int {
	n := 0
	for _, r := range s {
		n += utf16.RuneLen(r)
	}
	return n
}

// splitText cuts s into messages of at most limit characters (runes). It
// cuts at paragraph boundaries when that keeps a message at least half
// full, else at line boundaries, and inside an over-long line at a space.
// A cut inside a ``` code block closes the fence at the end of one message
// and reopens it (with the same info string) at the start of the next, so
// every message renders as well-formed Markdown. (The Slack adapter's
// splitter; adapters do not import each other.)
func splitText(s string, limit int) []string {
	if limit < 64 {
		limit = 64
	}
	if utf8.RuneCountInString(s) <= limit {
		return []string{s}
	}
	const closer = "```"
	// Room kept for a closing fence ("\n```") and a reopened one.
	lineMax := limit - 2*(len(closer)+1) - 32

	type line struct {
		text    string // including its trailing "\n", if any
		n       int    // runes
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
		for i, piece := range hardSplit(raw, lineMax) {
			l := line{text: piece, n: utf8.RuneCountInString(piece), fence: fence}
			trimmed := strings.TrimSpace(piece)
			// Only a line's own start can open or close a fence: a later
			// piece of a hard-split long line is mid-line.
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
			return fenceOf(prefix)
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
			if utf8.RuneCountInString(open) > 24 {
				open = closer // keep the reopened fence short
			}
			prefix = open + "\n"
			curLen = utf8.RuneCountInString(prefix)
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

func fenceOf(prefix string) string { return strings.TrimSpace(prefix) }

// hardSplit cuts a line longer than max runes, preferring the last space in
// each window; shorter lines come back whole.
func hardSplit(s string, max int) []string { return cutRunes(s, max, " \t") }

// cutRunes cuts s into pieces of at most n (> 0) runes. A piece ends just
// after the last of the bytes in breakAt when one falls in its second half,
// else mid-run. A string of at most n runes comes back whole.
func cutRunes(s string, n int, breakAt string) []string {
	var out []string
	for utf8.RuneCountInString(s) > n {
		cut := runeOffset(s, n)
		if b := strings.LastIndexAny(s[:cut], breakAt); b > cut/2 {
			cut = b + 1
		}
		out = append(out, s[:cut])
		s = s[cut:]
	}
	return append(out, s)
}

// truncateRunes shortens s to at most n runes, ending in "…" when cut.
func truncateRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	if n <= 1 {
		return "…"
	}
	return s[:runeOffset(s, n-1)] + "…"
}

// runeOffset is the byte offset of rune n of s (counting from 0); len(s)
// when s has no more than n runes.
func runeOffset(s string, n int) int {
	i := 0
	for off := range s {
		if i == n {
			return off
		}
		i++
	}
	return len(s)
}
