package slack

import "github.com/marlowe-bot/marlowe/internal/split"

// Slack's limits count characters (runes).

// splitText cuts s into messages of at most limit runes, code fences closed
// and reopened across a cut so every message renders as well-formed mrkdwn
// (see internal/split.Text).
func splitText(s string, limit int) []string { return split.Text(s, limit, split.Runes{}) }

// cutRunes cuts s into pieces of at most n (> 0) runes, preferring to end a
// piece after a byte in breakAt.
func cutRunes(s string, n int, breakAt string) []string {
	return split.Cut(s, n, breakAt, split.Runes{})
}

// truncateRunes shortens s to at most n runes, ending in "…" when cut.
func truncateRunes(s string, n int) string { return split.Truncate(s, n, split.Runes{}) }
