package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/marlowe-bot/marlowe/core"
)

var _ core.ExportStore = (*Store)(nil)

// PutExport stores an export archive (migration 00013_exports).
func (s *Store) PutExport(ctx context.Context, f core.ExportFile) error {
	if _, err := s.w.ExecContext(ctx, `INSERT INTO exports (id, platform, person, data, expires_at) VALUES (?, ?, ?, ?, ?)`,
		f.ID, f.Platform, f.User, f.Data, f.Expires.UnixMilli()); err != nil {
		return fmt.Errorf("store export %s: %w", f.ID, err)
	}
	return nil
}

// GetExport reads an export archive; core.ErrExportGone when there is none.
func (s *Store) GetExport(ctx context.Context, id string) (core.ExportFile, error) {
	f := core.ExportFile{ID: id}
	var exp int64
	err := s.r.QueryRowContext(ctx, `SELECT platform, person, data, expires_at FROM exports WHERE id = ?`, id).Scan(&f.Platform, &f.User, &f.Data, &exp)
	if errors.Is(err, sql.ErrNoRows) {
		return core.ExportFile{}, core.ErrExportGone
	}
	if err != nil {
		return core.ExportFile{}, fmt.Errorf("read export %s: %w", id, err)
	}
	f.Expires = time.UnixMilli(exp).UTC()
	return f, nil
}

// DeleteExports deletes every archive of user on platform.
func (s *Store) DeleteExports(ctx context.Context, platform, user string) (int, error) {
	return s.deleteExports(ctx, `platform = ? AND person = ?`, platform, user)
}

// DeleteExpiredExports deletes the archives expired at now.
func (s *Store) DeleteExpiredExports(ctx context.Context, now time.Time) (int, error) {
	return s.deleteExports(ctx, `expires_at <= ?`, now.UnixMilli())
}

func (s *Store) deleteExports(ctx context.Context, where string, args ...any) (int, error) {
	res, err := s.w.ExecContext(ctx, `DELETE FROM exports WHERE `+where, args...)
	if err != nil {
		return 0, fmt.Errorf("delete exports: %w", err)
	}
	n, _ := res.RowsAffected()
	return int(n), nil
}
