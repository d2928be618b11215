package coretest

import (
	"math/rand/v2"
	"strings"
)

// LongText is n characters of random words from seed: no 40-character
// piece of it turns up anywhere by chance, so an erasure test can search
// every row and file for any piece of it.
func LongText(seed uint64, n int) string {
	r := rand.New(rand.NewPCG(seed, 7))
	var b strings.Builder
	for b.Len() < n {
		w := make([]byte, 3+r.IntN(6))
		for i := range w {
			w[i] = byte('a' + r.IntN(26))
		}
		b.Write(w)
		b.WriteByte(' ')
	}
	return strings.TrimSpace(b.String()[:n])
}

// Pieces are every 40-character piece of text: what an erasure matches.
func Pieces(text string) []string {
	var out []string
	for i := 0; i+40 <= len(text); i++ {
		out = append(out, text[i:i+40])
	}
	return out
}

// PieceIn returns a 40-character piece of text that data holds, or "".
func PieceIn(data, text string) string {
	for _, p := range Pieces(text) {
		if strings.Contains(data, p) {
			return p
		}
	}
	return ""
}
