package sqlite_test

import (
	"path/filepath"
	"testing"

	"github.com/marlowe-bot/marlowe/core/journaltest"
)

func TestRecentPosts(t *testing.T) {
	t.Parallel()
	journaltest.RecentPostsSuite(t, open(t, filepath.Join(t.TempDir(), "j.db"), journaltest.NewSigner(t)))
}
