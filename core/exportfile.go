package core

import (
	"context"
	"errors"
	"time"
)

// ExportFile is a person's `export my data` archive, built once and kept
// until its link expires (docs/privacy.md): GET /export serves these
// bytes rather than reading every journal again.
type ExportFile struct {
	ID       string // random; the signed link names it
	Platform string
	User     string
	Data     []byte
	Expires  time.Time // the link's expiry: the file is deleted then
}

// ExportStore keeps export archives until they expire.
type ExportStore interface {
	PutExport(ctx context.Context, f ExportFile) error
	// GetExport returns ErrExportGone for an id it does not hold (never
	// stored, expired and deleted, or erased).
	GetExport(ctx context.Context, id string) (ExportFile, error)
	// DeleteExports deletes every archive of user on platform (`forget
	// me`) and returns how many.
	DeleteExports(ctx context.Context, platform, user string) (int, error)
	// DeleteExpiredExports deletes the archives that expired at or before
	// now and returns how many.
	DeleteExpiredExports(ctx context.Context, now time.Time) (int, error)
}

// ErrExportGone: no archive under that id (expired or deleted).
var ErrExportGone = errors.New("export is gone")
