package engine

import (
	"strings"
	"testing"
)

// Privacy replies speak of records in words, never the journal's kinds,
// and give the sandbox no advice it cannot follow: its own copies are
// erased with the journal's (core.PlatformEraser).
func TestPrivacyRepliesInPlainWords(t *testing.T) {
	got := kindCounts(map[string]int{"message.received": 2, "model.step": 1, "memory.written": 1, "fold.checkpoint": 3})
	if got != "1 note, 2 messages, 1 model step, 3 other records" {
		t.Errorf("kindCounts = %q", got)
	}
	if s := platformCopies("sandbox"); strings.Contains(s, "delete them there") || !strings.Contains(s, "erased too") {
		t.Errorf("sandbox advice = %q", s)
	}
	if s := platformCopies("slack"); !strings.Contains(s, "Slack itself") || !strings.Contains(s, "delete them there") {
		t.Errorf("slack advice = %q", s)
	}
}
