package sqlite_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/marlowe-bot/marlowe/core/journaltest"
	"github.com/marlowe-bot/marlowe/store/sqlite"
)

// TestMessagesByUsesTheIndex: a person's messages are found through the
// author index of migration 00014 and the channel order it holds, never by
// scanning the journal or sorting it.
func TestMessagesByUsesTheIndex(t *testing.T) {
	t.Parallel()
	s := open(t, filepath.Join(t.TempDir(), "j.db"), journaltest.NewSigner(t))
	rows, err := s.DB().QueryContext(t.Context(), "EXPLAIN QUERY PLAN "+sqlite.MessagesByQuery, "test", "U1")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(plan, "; ")
	if !strings.Contains(got, "USING INDEX commands_author_idx") || strings.Contains(got, "TEMP B-TREE") {
		t.Fatalf("plan %q: want the author index, in its order", got)
	}
}
