package journaltest

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/marlowe-bot/marlowe/core"
)

// RecentPoster is a journal that lists the bot's recent conversations
// (store/postgres, store/sqlite): Discord's gap fill reads their channels
// after a restart.
type RecentPoster interface {
	core.Journal
	RecentPosts(ctx context.Context, platform string, since time.Time, limit int) ([]core.Command, error)
}

// RecentPostsSuite checks RecentPosts: the newest message.posted of each
// (channel, thread) of the platform at or after since, newest first, at
// most limit; other platforms, older posts and other kinds are not listed.
func RecentPostsSuite(t *testing.T, j RecentPoster) {
	ctx := t.Context()
	now := time.Now().UTC().Truncate(time.Microsecond)
	var at time.Time
	b := core.NewBoundary(func() time.Time { return at })
	add := func(ago time.Duration, platform, channel, thread, id string, p core.Payload) {
		t.Helper()
		at = now.Add(-ago)
		sc := core.Scope{Platform: platform, Workspace: "g", Channel: channel, Thread: thread}
		d, err := b.Agent("r-"+id, sc, core.Meta{}, p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := j.Append(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	post := func(id string) *core.MessagePosted { return &core.MessagePosted{EffectID: "fx" + id, MessageID: id} }
	add(3*time.Hour, "discord", "A", "T1", "a1", post("a1"))
	add(time.Hour, "discord", "A", "T1", "a2", post("a2"))
	add(30*time.Minute, "discord", "A", "", "a3", post("a3"))
	add(10*24*time.Hour, "discord", "B", "", "b1", post("b1")) // before since
	add(5*time.Minute, "slack", "D", "", "d1", post("d1"))     // another platform
	add(time.Minute, "discord", "E", "", "e1", &core.RunCompleted{})
	since := now.Add(-7 * 24 * time.Hour)
	for _, tc := range []struct {
		limit int
		want  []string
	}{
		{10, []string{"a3", "a2"}},
		{1, []string{"a3"}},
	} {
		got, err := j.RecentPosts(ctx, "discord", since, tc.limit)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, c := range got {
			p, err := core.Decode[*core.MessagePosted](c)
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, p.MessageID)
		}
		if !slices.Equal(ids, tc.want) {
			t.Errorf("RecentPosts(limit %d) = %q, want %q", tc.limit, ids, tc.want)
		}
	}
}
