package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/marlowe-bot/marlowe/core"
)

var _ core.ExportStore = (*Store)(nil)

// PutExport stores an export archive (migration 00013_exports).
func (s *Store) PutExport(ctx context.Context, f core.ExportFile) error {
	if _, err := s.pool.Exec(ctx, `INSERT INTO exports (id, platform, person, data, expires_at) VALUES ($1, $2, $3, $4, $5)`,
		f.ID, f.Platform, f.User, f.Data, f.Expires); err != nil {
		return fmt.Errorf("store export %s: %w", f.ID, err)
	}
	return nil
}

// GetExport reads an export archive; core.ErrExportGone when there is none.
func (s *Store) GetExport(ctx context.Context, id string) (core.ExportFile, error) {
	f := core.ExportFile{ID: id}
	err := s.pool.QueryRow(ctx, `SELECT platform, person, data, expires_at FROM exports WHERE id = $1`, id).Scan(&f.Platform, &f.User, &f.Data, &f.Expires)
	if errors.Is(err, pgx.ErrNoRows) {
		return core.ExportFile{}, core.ErrExportGone
	}
	if err != nil {
		return core.ExportFile{}, fmt.Errorf("read export %s: %w", id, err)
	}
	f.Expires = f.Expires.UTC()
	return f, nil
}

// DeleteExports deletes every archive of user on platform.
func (s *Store) DeleteExports(ctx context.Context, platform, user string) (int, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM exports WHERE platform = $1 AND person = $2`, platform, user)
	if err != nil {
		return 0, fmt.Errorf("delete exports of %s: %w", user, err)
	}
	return int(tag.RowsAffected()), nil
}

// DeleteExpiredExports deletes the archives expired at now.
func (s *Store) DeleteExpiredExports(ctx context.Context, now time.Time) (int, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM exports WHERE expires_at <= $1`, now)
	if err != nil {
		return 0, fmt.Errorf("delete expired exports: %w", err)
	}
	return int(tag.RowsAffected()), nil
}
