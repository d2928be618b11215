package slack

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
)

// A routine's report on the Home tab says when it was filed and where to
// dismiss it, not a deadline it does not have.
func TestHomeTabRendersAReport(t *testing.T) {
	filed := time.Date(2026, 3, 5, 9, 30, 0, 0, time.UTC)
	items := []core.InboxItem{{ID: "routine-skipped:x", Kind: "report", Where: core.Scope{Platform: Platform, Workspace: "T1", Channel: "C1"},
		Title: "Routine r1 skipped its slot", RequestedAt: filed, ExpiresAt: filed.Add(7 * 24 * time.Hour)}}
	b, err := json.Marshal(homeBlocks(items))
	if err != nil {
		t.Fatal(err)
	}
	got := string(b)
	for _, want := range []string{"📋 *Routine r1 skipped its slot*", "C1\\u003e · filed Mar 5 09:30 UTC", "dismiss it on its card"} {
		if !strings.Contains(got, want) {
			t.Errorf("home tab lacks %q: %s", want, got)
		}
	}
	if strings.Contains(got, "decide by") {
		t.Errorf("a report shows a deadline: %s", got)
	}
}
