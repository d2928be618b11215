package migrations_test

import (
	"io/fs"
	"slices"
	"strings"
	"testing"

	"github.com/marlowe-bot/marlowe/migrations"
)

// TestDialectsInStep checks both dialects carry the same numbered
// migrations, each in goose format: a schema change lands in both stores.
func TestDialectsInStep(t *testing.T) {
	names := func(fsys fs.FS) []string {
		t.Helper()
		entries, err := fs.ReadDir(fsys, ".")
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range entries {
			b, err := fs.ReadFile(fsys, e.Name())
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(b), "-- +goose Up") || !strings.Contains(string(b), "-- +goose Down") {
				t.Errorf("%s: not a goose migration (missing Up or Down annotation)", e.Name())
			}
			out = append(out, e.Name())
		}
		return out
	}
	pg, lite := names(migrations.Postgres()), names(migrations.SQLite())
	if !slices.Contains(pg, "00001_journal.sql") {
		t.Fatalf("postgres migrations: %v", pg)
	}
	if !slices.Equal(pg, lite) {
		t.Fatalf("dialects differ:\npostgres %v\nsqlite   %v", pg, lite)
	}
}
