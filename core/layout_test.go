package core_test

import (
	"go/build"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/marlowe-bot/marlowe"

// TestImportsPointDown holds the package layout of docs/architecture.md:
// core imports nothing of the module; its leaves (gate, fold, chatcommand)
// and replica import only core (chatcommand also gate); and only the
// composition root imports the engine (tests and test support aside).
func TestImportsPointDown(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	allowed := map[string][]string{
		"core":                           {},
		"core/gate":                      {"core"},
		"core/fold":                      {"core"},
		"core/chatcommand":               {"core", "core/gate"},
		"replica":                        {"core"},
		"connectors":                     {"core"},
		"connectors/internal/testserver": {},
		"vault":                          {"core"},
		"signin":                         {"core", "vault"},
		"engine":                         {"core", "core/gate", "core/fold", "core/chatcommand", "replica"},
	}
	engineImporters := []string{"cmd/bot", "internal/testengine"}
	seen := 0
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules") {
			return filepath.SkipDir
		}
		pkg, err := build.ImportDir(path, 0)
		if err != nil {
			return nil // no Go files here
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		var own []string
		for _, imp := range pkg.Imports { // non-test files only
			if p, ok := strings.CutPrefix(imp, module+"/"); ok {
				own = append(own, p)
			}
		}
		seen++
		if want, ok := allowed[rel]; ok {
			for _, p := range own {
				if !slices.Contains(want, p) {
					t.Errorf("%s imports %s; it may import only %v", rel, p, want)
				}
			}
		}
		if slices.Contains(own, "engine") && !slices.Contains(engineImporters, rel) {
			t.Errorf("%s imports engine: only %v may (the others use core's ports)", rel, engineImporters)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if seen < 20 {
		t.Fatalf("walked only %d packages under %s", seen, root)
	}
}
