package sqlite

import (
	"context"
	"slices"
	"time"

	"github.com/marlowe-bot/marlowe/core"
)

// recentPostsSQL picks, per (channel, thread) of a platform, the newest
// message.posted at or after ?1: the conversations the bot took part in
// lately, most recent first, at most ?3. It reads commands_kind_at_idx
// (migration 00004), so its cost is the posts in the window, never the
// journal.
const recentPostsSQL = `
	SELECT channel, max(seq) AS seq FROM commands
	 WHERE kind = 'message.posted' AND NOT redacted AND at >= ?1 AND platform = ?2
	 GROUP BY channel, thread ORDER BY max(at) DESC LIMIT ?3`

// RecentPosts returns the newest message.posted of each (channel, thread)
// of platform posted at or after since, newest first, at most limit: where
// the bot was in a conversation lately (Discord's gap fill after a restart
// reads those channels).
func (s *Store) RecentPosts(ctx context.Context, platform string, since time.Time, limit int) ([]core.Command, error) {
	cmds, err := s.tail(ctx, "recent posts of "+platform, recentPostsSQL, ceilMicro(since).UnixMicro(), platform, limit)
	if err != nil {
		return nil, err
	}
	return newestFirst(cmds), nil
}

// newestFirst orders cmds by time, newest first (tail returns them by
// channel and seq).
func newestFirst(cmds []core.Command) []core.Command {
	slices.SortStableFunc(cmds, func(a, b core.Command) int { return b.At().Compare(a.At()) })
	return cmds
}
