package postgres

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/marlowe-bot/marlowe/core"
)

var _ core.BlobStore = (*Store)(nil)

// PutBlob stores data under its sha256 (migration 00012_blobs); storing it
// again is a no-op.
func (s *Store) PutBlob(ctx context.Context, hash string, data []byte) error {
	if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != hash {
		return fmt.Errorf("blob %s: content does not match its hash", hash)
	}
	if _, err := s.pool.Exec(ctx, `INSERT INTO blobs (sha256, data) VALUES ($1, $2) ON CONFLICT (sha256) DO NOTHING`, hash, data); err != nil {
		return fmt.Errorf("put blob %s: %w", hash, err)
	}
	return nil
}

// GetBlob reads a blob; core.ErrBlobNotFound when there is none.
func (s *Store) GetBlob(ctx context.Context, hash string) ([]byte, error) {
	var b []byte
	err := s.pool.QueryRow(ctx, `SELECT data FROM blobs WHERE sha256 = $1`, hash).Scan(&b)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, core.ErrBlobNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("get blob %s: %w", hash, err)
	}
	return b, nil
}

// DeleteBlob removes a blob (absent is not an error).
func (s *Store) DeleteBlob(ctx context.Context, hash string) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM blobs WHERE sha256 = $1`, hash); err != nil {
		return fmt.Errorf("delete blob %s: %w", hash, err)
	}
	return nil
}
