package memory

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// maxTerms caps the lexical terms of one query: a pasted paragraph must not
// turn into a hundred-way OR.
const maxTerms = 24

// stopwords are dropped from lexical queries so that a memory is not a
// "real" lexical match merely for sharing "the" or "what" with the query.
// Both stores see the same terms, so they agree on what matches.
var stopwords = func() map[string]struct{} {
	m := map[string]struct{}{}
	for _, w := range strings.Fields(`a about above after again all am an and any are as at be because been
		before being below between both but by can could did do does doing down during each few for from
		further had has have having he her here hers him his how i if in into is it its itself just me more
		most my no nor not now of off on once only or other our ours out over own same she should so some
		such than that the their theirs them then there these they this those through to too under until
		up very was we were what when where which while who whom why will with would you your yours
		s t don know tell remember recall anything something please`) {
		m[w] = struct{}{}
	}
	return m
}()

// Terms splits text into the normalised lexical terms recall searches for:
// lower-cased runs of letters and digits, stopwords and one-letter words
// dropped, duplicates removed, at most 24. Stores stem them further (the
// Postgres 'english' configuration, SQLite's porter tokenizer).
func Terms(text string) []string {
	seen := map[string]struct{}{}
	var out []string
	for _, w := range strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	}) {
		if utf8.RuneCountInString(w) < 2 {
			continue
		}
		if _, stop := stopwords[w]; stop {
			continue
		}
		if _, dup := seen[w]; dup {
			continue
		}
		seen[w] = struct{}{}
		out = append(out, w)
		if len(out) == maxTerms {
			break
		}
	}
	return out
}

// clean makes text storable everywhere: valid UTF-8, no NUL (Postgres text
// cannot hold it), no other control characters except newline and tab,
// surrounding space trimmed.
func clean(text string) string {
	text = strings.ToValidUTF8(text, "\uFFFD")
	text = strings.Map(func(r rune) rune {
		if r == '\n' || r == '\t' {
			return r
		}
		if unicode.IsControl(r) {
			return -1
		}
		return r
	}, text)
	return strings.TrimSpace(text)
}

// truncate cuts text to at most n runes, preferring a word boundary in the
// last fifth, and marks the cut with an ellipsis (counted in n).
func truncate(text string, n int) string {
	if n <= 0 || utf8.RuneCountInString(text) <= n {
		return text
	}
	runes := []rune(text)
	cut := n - 1 // room for the ellipsis
	for i := cut; i > cut*4/5; i-- {
		if unicode.IsSpace(runes[i]) {
			cut = i
			break
		}
	}
	return strings.TrimRightFunc(string(runes[:cut]), unicode.IsSpace) + "…"
}

// estimateTokens is the injection cost estimate: a token per four characters.
func estimateTokens(chars int) int { return (chars + 3) / 4 }
