package postgres

import (
	"context"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// ExplainRecentPostsForTest returns the plan of RecentPosts' selection
// after refreshing the commands table's statistics.
func (s *Store) ExplainRecentPostsForTest(ctx context.Context, platform string, since time.Time, limit int) (string, error) {
	if _, err := s.pool.Exec(ctx, `VACUUM ANALYZE commands`); err != nil {
		return "", err
	}
	rows, err := s.pool.Query(ctx, "EXPLAIN (COSTS OFF) "+recentPostsSQL, ceilMicro(since), platform, limit)
	if err != nil {
		return "", err
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return strings.Join(lines, "\n"), err
}

// ExplainMessagesByForTest returns the plan of MessagesBy's selection
// after refreshing the commands table's statistics.
func (s *Store) ExplainMessagesByForTest(ctx context.Context, platform, person string) (string, error) {
	if _, err := s.pool.Exec(ctx, `VACUUM ANALYZE commands`); err != nil {
		return "", err
	}
	rows, err := s.pool.Query(ctx, "EXPLAIN (COSTS OFF) "+selectCommand+messagesBy, platform, person)
	if err != nil {
		return "", err
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return strings.Join(lines, "\n"), err
}
