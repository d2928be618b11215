package discord

import (
	"os"
	"path/filepath"
	"testing"
)

// The captured payloads live in the project's shared folder next to the
// repository: ../shared/discord-payloads/ from the repository root (in a
// clone at /work/main, /work/shared/...). MARLOWE_SHARED_DIR overrides it.
// Without it the tests that need it are skipped, loudly, except under
// MARLOWE_REQUIRE_SERVICES=1 (CI), where that is a failure.
func sharedFolder(t testing.TB, name string) string {
	t.Helper()
	base := os.Getenv("MARLOWE_SHARED_DIR")
	if base == "" {
		dir, err := os.Getwd()
		if err != nil {
			t.Fatal(err)
		}
		for {
			if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
				break
			}
			if filepath.Dir(dir) == dir {
				t.Fatal("go.mod not found above the test's directory")
			}
			dir = filepath.Dir(dir)
		}
		base = filepath.Join(dir, "..", "shared")
	}
	folder := filepath.Join(base, name)
	if _, err := os.Stat(filepath.Join(folder, "MANIFEST.tsv")); err != nil {
		if os.Getenv("MARLOWE_REQUIRE_SERVICES") == "1" {
			t.Fatalf("payload folder %s missing (%v): set MARLOWE_SHARED_DIR", folder, err)
		}
		t.Skipf("SKIPPED: payload folder %s missing (%v); set MARLOWE_SHARED_DIR", folder, err)
	}
	return folder
}

// payload reads one captured payload file.
func payload(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(sharedFolder(t, "discord-payloads"), name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}
