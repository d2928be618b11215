package postgres_test

import (
	"testing"

	"github.com/marlowe-bot/marlowe/core/journaltest"
	"github.com/marlowe-bot/marlowe/internal/testpg"
)

func TestRecentPosts(t *testing.T) {
	t.Parallel()
	journaltest.RecentPostsSuite(t, open(t, testpg.New(t), journaltest.NewSigner(t)))
}
