package core

import (
	"encoding/json"
	"hash/maphash"
	"strings"
)

// Finding erased text (docs/privacy.md, "What an erasure finds"). The bot
// keeps pieces of what people write, not only whole copies: a conversation
// turn is cut to its first 1,500 characters, a recalled note to an excerpt,
// and a tool call may quote a sentence of a message. So an erasure looks
// for every piece of MatchPiece characters or more of each erased text, not
// only for the whole text: a string carries an erased text when it
// contains the whole of it or any MatchPiece-long piece of it (compared
// case-insensitively, white space collapsed). A text shorter than
// MatchPiece is looked for whole.
//
// A TextMatcher is an index of the erased texts, built once per erasure:
// each payload is decoded and scanned once, whatever the number of texts
// (a rolling hash over every position, looked up in a set of the texts'
// windows), rather than once per text.

// MatchPiece is the shortest piece of an erased text an erasure always
// finds on its own (in bytes of the compared form; a piece of 40
// characters is at least 40 bytes). Pieces shorter than matchWindow are
// never found; those in between may be.
const MatchPiece = 40

// Windows of matchWindow bytes are indexed every matchStride bytes of each
// text: a piece of matchWindow+matchStride-1 bytes always holds one whole.
const (
	matchWindow = 32
	matchStride = MatchPiece - matchWindow + 1
	shortKey    = 8 // short texts are found by their first bytes, then compared
)

// TextMatcher finds any of a set of erased texts, or pieces of them.
type TextMatcher struct {
	base    uint64
	pow     uint64 // base^(matchWindow-1)
	windows map[uint64]struct{}
	// filter has one bit per window hash (mod its size): most positions of
	// a payload are ruled out in a table that stays in cache, before the
	// map is asked.
	filter []uint64
	// short texts (shorter than MatchPiece), by key length then by their
	// first min(len, shortKey) bytes.
	short map[int]map[string][]string
}

// NewTextMatcher indexes texts; empty ones (after normalising) match
// nothing.
func NewTextMatcher(texts ...string) *TextMatcher {
	// a random odd base per matcher: no text can be made to collide on purpose
	m := &TextMatcher{base: new(maphash.Hash).Sum64() | 1, windows: map[uint64]struct{}{}, short: map[int]map[string][]string{}}
	m.pow = 1
	for i := 0; i < matchWindow-1; i++ {
		m.pow *= m.base
	}
	for _, t := range texts {
		m.Add(t)
	}
	return m
}

// Add indexes one more text.
func (m *TextMatcher) Add(text string) {
	t := normText(text)
	switch {
	case t == "":
	case len(t) < MatchPiece:
		k := min(len(t), shortKey)
		if m.short[k] == nil {
			m.short[k] = map[string][]string{}
		}
		m.short[k][t[:k]] = append(m.short[k][t[:k]], t)
	default:
		for i := 0; i+matchWindow <= len(t); i += matchStride {
			m.addWindow(m.hash(t[i : i+matchWindow]))
		}
		// the last window too, so a piece at the very end is found
		m.addWindow(m.hash(t[len(t)-matchWindow:]))
	}
}

const filterBits = 1 << 22 // 512 KiB

func (m *TextMatcher) addWindow(h uint64) {
	if m.filter == nil {
		m.filter = make([]uint64, filterBits/64)
	}
	m.windows[h] = struct{}{}
	b := h % filterBits
	m.filter[b/64] |= 1 << (b % 64)
}

// Empty reports whether the matcher holds no text.
func (m *TextMatcher) Empty() bool { return len(m.windows) == 0 && len(m.short) == 0 }

func (m *TextMatcher) hash(s string) uint64 {
	var h uint64
	for i := 0; i < len(s); i++ {
		h = h*m.base + uint64(s[i])
	}
	return h
}

// MatchString reports whether s holds an erased text or a piece of one.
func (m *TextMatcher) MatchString(s string) bool { return m.matchNorm(normText(s)) }

func (m *TextMatcher) matchNorm(s string) bool {
	for k, byKey := range m.short {
		for i := 0; i+k <= len(s); i++ {
			for _, want := range byKey[s[i:i+k]] {
				if strings.HasPrefix(s[i:], want) {
					return true
				}
			}
		}
	}
	if len(m.windows) == 0 || len(s) < matchWindow {
		return false
	}
	h := m.hash(s[:matchWindow])
	for i := 0; ; i++ {
		if b := h % filterBits; m.filter[b/64]&(1<<(b%64)) != 0 {
			if _, ok := m.windows[h]; ok {
				return true
			}
		}
		if i+matchWindow >= len(s) {
			return false
		}
		h = (h-uint64(s[i])*m.pow)*m.base + uint64(s[i+matchWindow])
	}
}

// Carries reports whether c's payload holds an erased text or a piece of
// one in any string value (keys included), including strings that are
// themselves JSON (a tool call's arguments, a tool result), which are
// searched after decoding too. A redacted command carries nothing.
func (m *TextMatcher) Carries(c Command) bool {
	if m.Empty() || c.Redacted() || len(c.payload) == 0 {
		return false
	}
	var v any
	if err := json.Unmarshal(c.payload, &v); err != nil {
		return m.MatchString(string(c.payload))
	}
	return m.value(v, 0)
}

func (m *TextMatcher) value(v any, depth int) bool {
	switch x := v.(type) {
	case string:
		if m.MatchString(x) {
			return true
		}
		if depth < 4 {
			if t := strings.TrimSpace(x); strings.HasPrefix(t, "{") || strings.HasPrefix(t, "[") || strings.HasPrefix(t, `"`) {
				var inner any
				if json.Unmarshal([]byte(t), &inner) == nil {
					return m.value(inner, depth+1)
				}
			}
		}
	case map[string]any:
		for k, e := range x {
			if m.MatchString(k) || m.value(e, depth) {
				return true
			}
		}
	case []any:
		for _, e := range x {
			if m.value(e, depth) {
				return true
			}
		}
	}
	return false
}
