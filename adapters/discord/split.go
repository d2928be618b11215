package discord

import (
	"unicode/utf8"

	"github.com/marlowe-bot/marlowe/internal/split"
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

func utf16Len(s string) int { return split.UTF16{}.Len(s) }

// splitText cuts s into messages of at most limit runes (see
// internal/split.Text); splitMessage tightens parts that exceed Discord's
// UTF-16 count.
func splitText(s string, limit int) []string { return split.Text(s, limit, split.Runes{}) }

// truncateRunes shortens s to at most n runes, ending in "…" when cut.
func truncateRunes(s string, n int) string { return split.Truncate(s, n, split.Runes{}) }
