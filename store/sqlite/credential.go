package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/marlowe-bot/marlowe/core"
)

// The store also keeps sealed per-person grants and followed sign-in links
// (core.CredentialStore): ciphertext only, see the PostgreSQL store.

var _ core.CredentialStore = (*Store)(nil)

const grantCols = `platform, person, server, connected_at, refreshed_at, expires_at, key_id, sealed`

func ms(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func fromMS(v int64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	return time.UnixMilli(v).UTC()
}

// PutGrant implements core.CredentialStore.
func (s *Store) PutGrant(ctx context.Context, g core.SealedGrant) error {
	if _, err := s.w.ExecContext(ctx, `INSERT INTO grants (`+grantCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (platform, person, server) DO UPDATE SET connected_at = excluded.connected_at,
			refreshed_at = excluded.refreshed_at, expires_at = excluded.expires_at,
			key_id = excluded.key_id, sealed = excluded.sealed`,
		g.Platform, g.Person, g.Server, ms(g.ConnectedAt), ms(g.RefreshedAt), ms(g.ExpiresAt), g.KeyID, g.Sealed); err != nil {
		return fmt.Errorf("store grant of %s for %s: %w", g.Person, g.Server, err)
	}
	return nil
}

// Grant implements core.CredentialStore.
func (s *Store) Grant(ctx context.Context, platform, person, server string) (core.SealedGrant, bool, error) {
	gs, err := s.grants(ctx, `WHERE platform = ? AND person = ? AND server = ?`, platform, person, server)
	if err != nil || len(gs) == 0 {
		return core.SealedGrant{}, false, err
	}
	return gs[0], true, nil
}

// Grants implements core.CredentialStore.
func (s *Store) Grants(ctx context.Context, platform, person string) ([]core.SealedGrant, error) {
	return s.grants(ctx, `WHERE platform = ? AND (? = '' OR person = ?) ORDER BY person, server`, platform, person, person)
}

func (s *Store) grants(ctx context.Context, where string, args ...any) ([]core.SealedGrant, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT `+grantCols+` FROM grants `+where, args...)
	if err != nil {
		return nil, fmt.Errorf("read grants: %w", err)
	}
	defer rows.Close()
	var out []core.SealedGrant
	for rows.Next() {
		var g core.SealedGrant
		var connected, refreshed, expires int64
		if err := rows.Scan(&g.Platform, &g.Person, &g.Server, &connected, &refreshed, &expires, &g.KeyID, &g.Sealed); err != nil {
			return nil, fmt.Errorf("read grants: %w", err)
		}
		g.ConnectedAt, g.RefreshedAt, g.ExpiresAt = fromMS(connected), fromMS(refreshed), fromMS(expires)
		out = append(out, g)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read grants: %w", err)
	}
	return out, nil
}

// DeleteGrant implements core.CredentialStore.
func (s *Store) DeleteGrant(ctx context.Context, platform, person, server string) (bool, error) {
	res, err := s.w.ExecContext(ctx, `DELETE FROM grants WHERE platform = ? AND person = ? AND server = ?`, platform, person, server)
	if err != nil {
		return false, fmt.Errorf("delete grant of %s for %s: %w", person, server, err)
	}
	n, _ := res.RowsAffected()
	return n > 0, nil
}

// DeleteGrants implements core.CredentialStore.
func (s *Store) DeleteGrants(ctx context.Context, platform, person string) (int, error) {
	if person == "" {
		return 0, errors.New("delete grants: empty person")
	}
	res, err := s.w.ExecContext(ctx, `DELETE FROM grants WHERE platform = ? AND person = ?`, platform, person)
	if err != nil {
		return 0, fmt.Errorf("delete grants of %s: %w", person, err)
	}
	n, _ := res.RowsAffected()
	return int(n), nil
}

// BeginSignIn implements core.CredentialStore.
func (s *Store) BeginSignIn(ctx context.Context, si core.SignIn) error {
	_, err := s.w.ExecContext(ctx, `INSERT INTO signins (link_id, state_hash, platform, person, server, browser_hash, key_id, sealed, expires_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		si.LinkID, si.StateHash, si.Platform, si.Person, si.Server, si.BrowserHash, si.KeyID, si.Sealed, ms(si.ExpiresAt))
	if err != nil && strings.Contains(err.Error(), "UNIQUE constraint failed") {
		return core.ErrSignInUsed
	}
	if err != nil {
		return fmt.Errorf("record sign-in for %s: %w", si.Server, err)
	}
	return nil
}

// CompleteSignIn implements core.CredentialStore.
func (s *Store) CompleteSignIn(ctx context.Context, stateHash string, now time.Time) (core.SignIn, bool, error) {
	var si core.SignIn
	var exp int64
	err := s.w.QueryRowContext(ctx, `UPDATE signins SET completed = 1
		WHERE state_hash = ? AND completed = 0 AND expires_at > ?
		RETURNING link_id, state_hash, platform, person, server, browser_hash, key_id, sealed, expires_at`, stateHash, now.UnixMilli()).
		Scan(&si.LinkID, &si.StateHash, &si.Platform, &si.Person, &si.Server, &si.BrowserHash, &si.KeyID, &si.Sealed, &exp)
	if errors.Is(err, sql.ErrNoRows) {
		return core.SignIn{}, false, nil
	}
	if err != nil {
		return core.SignIn{}, false, fmt.Errorf("complete sign-in: %w", err)
	}
	si.ExpiresAt = fromMS(exp)
	return si, true, nil
}

// PurgeSignIns implements core.CredentialStore.
func (s *Store) PurgeSignIns(ctx context.Context, before time.Time) (int, error) {
	res, err := s.w.ExecContext(ctx, `DELETE FROM signins WHERE expires_at < ?`, before.UnixMilli())
	if err != nil {
		return 0, fmt.Errorf("purge sign-ins: %w", err)
	}
	n, _ := res.RowsAffected()
	return int(n), nil
}
