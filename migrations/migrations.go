// Package migrations holds the SQL schema of every store, embedded into the
// binary and applied with goose on start (and by `bot migrate`).
//
// Files are goose-format SQL, numbered per dialect: postgres/NNNNN_name.sql
// and sqlite/NNNNN_name.sql. A schema change adds a file with the next number
// to both directories; applied files are never edited.
package migrations

import (
	"embed"
	"fmt"
	"io/fs"
)

//go:embed postgres/*.sql sqlite/*.sql
var files embed.FS

// Postgres returns the PostgreSQL migrations, rooted at their directory as
// goose expects.
func Postgres() fs.FS { return sub("postgres") }

// SQLite returns the SQLite migrations, rooted at their directory.
func SQLite() fs.FS { return sub("sqlite") }

func sub(dir string) fs.FS {
	f, err := fs.Sub(files, dir)
	if err != nil { // dir is a literal embedded above: cannot fail
		panic(fmt.Sprintf("migrations: %s: %v", dir, err))
	}
	return f
}
