package postgres_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
	"github.com/marlowe-bot/marlowe/core/journaltest"
	"github.com/marlowe-bot/marlowe/internal/testpg"
	"github.com/marlowe-bot/marlowe/store/postgres"
)

func TestRecentPosts(t *testing.T) {
	t.Parallel()
	journaltest.RecentPostsSuite(t, open(t, testpg.New(t), journaltest.NewSigner(t)))
}

// seedBusy appends rows commands to each of chans Discord channels, one
// post (the bot's) in every hundred, the rest messages received.
func seedBusy(tb testing.TB, s *postgres.Store, chans, rows int) {
	tb.Helper()
	b := core.NewBoundary(nil)
	for c := range chans {
		sc := core.Scope{Platform: "discord", Workspace: "g", Channel: fmt.Sprint("C", c)}
		var drafts []core.Draft
		for i := range rows {
			id := fmt.Sprintf("%d-%d", c, i)
			var d core.Draft
			var err error
			if i%100 == 99 {
				d, err = b.Agent("r"+id, sc, core.Meta{}, &core.MessagePosted{EffectID: "fx" + id, MessageID: id})
			} else {
				d, err = b.Human(core.Person{ID: "p"}, sc, core.Meta{}, &core.MessageReceived{MessageID: id, Author: core.Person{ID: "p"}, Text: "chatter"})
			}
			if err != nil {
				tb.Fatal(err)
			}
			drafts = append(drafts, d)
		}
		for len(drafts) > 0 {
			n := min(len(drafts), 500)
			if _, err := s.Append(tb.Context(), drafts[:n]...); err != nil {
				tb.Fatal(err)
			}
			drafts = drafts[n:]
		}
	}
}

// RecentPosts reads the posted-at index, not the journal: its cost is the
// bot's posts in the window, whatever else the journal holds.
func TestRecentPostsReadsThePostedAtIndex(t *testing.T) {
	t.Parallel()
	s := open(t, testpg.New(t), journaltest.NewSigner(t))
	seedBusy(t, s, 20, 1000)
	plan, err := s.ExplainRecentPostsForTest(t.Context(), "discord", time.Now().Add(-7*24*time.Hour), 200)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("plan:\n%s", plan)
	if !strings.Contains(plan, "commands_posted_at_idx") || strings.Contains(plan, "Seq Scan on commands") {
		t.Fatalf("RecentPosts does not read the posted-at index:\n%s", plan)
	}
}

// BenchmarkRecentPosts: 100,000 commands over 100 channels, 1,000 of them
// posts, all within the window.
func BenchmarkRecentPosts(b *testing.B) {
	s := open(b, testpg.New(b), journaltest.NewSigner(b))
	seedBusy(b, s, 100, 1000)
	since := time.Now().Add(-7 * 24 * time.Hour)
	b.ResetTimer()
	for b.Loop() {
		got, err := s.RecentPosts(b.Context(), "discord", since, 200)
		if err != nil || len(got) != 100 {
			b.Fatalf("%d posts, %v", len(got), err)
		}
	}
}
