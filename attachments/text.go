package attachments

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// boundText keeps s whole when it fits max bytes, else its head and tail
// (two thirds and one third of max, cut at rune and line boundaries where
// one is near) and says how much of the middle was left out.
func boundText(s string, max int) (string, string) {
	if len(s) <= max {
		return s, ""
	}
	headN, tailN := max*2/3, max/3
	head := s[:headN]
	for !utf8.ValidString(head) && len(head) > 0 {
		head = head[:len(head)-1]
	}
	if i := strings.LastIndexByte(head, '\n'); i > len(head)/2 {
		head = head[:i+1]
	}
	tail := s[len(s)-tailN:]
	for !utf8.ValidString(tail) && len(tail) > 0 {
		tail = tail[1:]
	}
	if i := strings.IndexByte(tail, '\n'); i >= 0 && i < len(tail)/2 {
		tail = tail[i+1:]
	}
	cut := len(s) - len(head) - len(tail)
	lines := strings.Count(s[len(head):len(s)-len(tail)], "\n")
	note := fmt.Sprintf("%d of %d bytes (about %d lines) were cut from the middle; the first %d and last %d bytes are shown", cut, len(s), lines, len(head), len(tail))
	return head + fmt.Sprintf("\n[… %d bytes cut …]\n", cut) + tail, note
}
