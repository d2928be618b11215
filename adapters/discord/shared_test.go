package discord

import (
	"os"
	"path/filepath"
	"testing"
)

// The captured payloads (public SDK fixtures and published captures, with
// their sources in MANIFEST.tsv and README.md) are committed under
// testdata/discord-payloads/, copied from the project's shared folder, so a clone
// anywhere tests them. MARLOWE_SHARED_DIR=<dir> plays <dir>/discord-payloads/
// instead (a newer capture set; a file without a row fails the table test).
func sharedFolder(t testing.TB, name string) string {
	t.Helper()
	folder := filepath.Join("testdata", name)
	if base := os.Getenv("MARLOWE_SHARED_DIR"); base != "" {
		folder = filepath.Join(base, name)
	}
	if _, err := os.Stat(filepath.Join(folder, "MANIFEST.tsv")); err != nil {
		t.Fatalf("payload folder %s: %v", folder, err)
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
