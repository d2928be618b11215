package telegram

import "github.com/marlowe-bot/marlowe/internal/split"

// Telegram measures message length in UTF-16 code units (its 4,096 limit
// and entity offsets alike), so every length here is u16len, not runes: an
// answer full of emoji would otherwise be refused as too long.

// u16len is the length of s in UTF-16 code units.
func u16len(s string) int { return split.UTF16{}.Len(s) }

// splitText cuts s into messages of at most limit UTF-16 units, code fences
// closed and reopened across a cut (see internal/split.Text).
func splitText(s string, limit int) []string { return split.Text(s, limit, split.UTF16{}) }

// truncateRunes shortens s to at most n UTF-16 units, ending in "…" when cut.
func truncateRunes(s string, n int) string { return split.Truncate(s, n, split.UTF16{}) }
