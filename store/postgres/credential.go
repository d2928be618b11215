package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/marlowe-bot/marlowe/core"
)

// The store also keeps sealed per-person grants and followed sign-in links
// (core.CredentialStore). It receives ciphertext only: sealing happens in
// the process that holds MARLOWE_SECRETS_KEY (package vault).

var _ core.CredentialStore = (*Store)(nil)

const grantCols = `platform, person, server, connected_at, refreshed_at, expires_at, key_id, sealed`

// PutGrant implements core.CredentialStore.
func (s *Store) PutGrant(ctx context.Context, g core.SealedGrant) error {
	if _, err := s.pool.Exec(ctx, `INSERT INTO grants (`+grantCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
		ON CONFLICT (platform, person, server) DO UPDATE SET connected_at = EXCLUDED.connected_at,
			refreshed_at = EXCLUDED.refreshed_at, expires_at = EXCLUDED.expires_at,
			key_id = EXCLUDED.key_id, sealed = EXCLUDED.sealed`,
		g.Platform, g.Person, g.Server, g.ConnectedAt, optTime(g.RefreshedAt), optTime(g.ExpiresAt), g.KeyID, g.Sealed); err != nil {
		return fmt.Errorf("store grant of %s for %s: %w", g.Person, g.Server, err)
	}
	return nil
}

// Grant implements core.CredentialStore.
func (s *Store) Grant(ctx context.Context, platform, person, server string) (core.SealedGrant, bool, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+grantCols+` FROM grants WHERE platform = $1 AND person = $2 AND server = $3`,
		platform, person, server)
	if err != nil {
		return core.SealedGrant{}, false, fmt.Errorf("read grant of %s for %s: %w", person, server, err)
	}
	gs, err := pgx.CollectRows(rows, scanGrant)
	if err != nil || len(gs) == 0 {
		return core.SealedGrant{}, false, wrapIf(err, "read grant of %s for %s", person, server)
	}
	return gs[0], true, nil
}

// Grants implements core.CredentialStore.
func (s *Store) Grants(ctx context.Context, platform, person string) ([]core.SealedGrant, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+grantCols+` FROM grants WHERE platform = $1 AND ($2 = '' OR person = $2)
		ORDER BY person, server`, platform, person)
	if err != nil {
		return nil, fmt.Errorf("list grants: %w", err)
	}
	gs, err := pgx.CollectRows(rows, scanGrant)
	if err != nil {
		return nil, fmt.Errorf("list grants: %w", err)
	}
	return gs, nil
}

func scanGrant(row pgx.CollectableRow) (core.SealedGrant, error) {
	var g core.SealedGrant
	var refreshed, expires *time.Time
	err := row.Scan(&g.Platform, &g.Person, &g.Server, &g.ConnectedAt, &refreshed, &expires, &g.KeyID, &g.Sealed)
	if refreshed != nil {
		g.RefreshedAt = *refreshed
	}
	if expires != nil {
		g.ExpiresAt = *expires
	}
	return g, err
}

// DeleteGrant implements core.CredentialStore.
func (s *Store) DeleteGrant(ctx context.Context, platform, person, server string) (bool, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM grants WHERE platform = $1 AND person = $2 AND server = $3`, platform, person, server)
	if err != nil {
		return false, fmt.Errorf("delete grant of %s for %s: %w", person, server, err)
	}
	return tag.RowsAffected() > 0, nil
}

// DeleteGrants implements core.CredentialStore.
func (s *Store) DeleteGrants(ctx context.Context, platform, person string) (int, error) {
	if person == "" {
		return 0, errors.New("delete grants: empty person")
	}
	tag, err := s.pool.Exec(ctx, `DELETE FROM grants WHERE platform = $1 AND person = $2`, platform, person)
	if err != nil {
		return 0, fmt.Errorf("delete grants of %s: %w", person, err)
	}
	return int(tag.RowsAffected()), nil
}

// BeginSignIn implements core.CredentialStore.
func (s *Store) BeginSignIn(ctx context.Context, si core.SignIn) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO signins (link_id, state_hash, platform, person, server, browser_hash, key_id, sealed, expires_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
		si.LinkID, si.StateHash, si.Platform, si.Person, si.Server, si.BrowserHash, si.KeyID, si.Sealed, si.ExpiresAt)
	if pgErr := (*pgconn.PgError)(nil); errors.As(err, &pgErr) && pgErr.Code == "23505" { // unique_violation
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
	err := s.pool.QueryRow(ctx, `UPDATE signins SET completed = true
		WHERE state_hash = $1 AND NOT completed AND expires_at > $2
		RETURNING link_id, state_hash, platform, person, server, browser_hash, key_id, sealed, expires_at`, stateHash, now).
		Scan(&si.LinkID, &si.StateHash, &si.Platform, &si.Person, &si.Server, &si.BrowserHash, &si.KeyID, &si.Sealed, &si.ExpiresAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return core.SignIn{}, false, nil
	}
	if err != nil {
		return core.SignIn{}, false, fmt.Errorf("complete sign-in: %w", err)
	}
	return si, true, nil
}

// PurgeSignIns implements core.CredentialStore.
func (s *Store) PurgeSignIns(ctx context.Context, before time.Time) (int, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM signins WHERE expires_at < $1`, before)
	if err != nil {
		return 0, fmt.Errorf("purge sign-ins: %w", err)
	}
	return int(tag.RowsAffected()), nil
}

func optTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

func wrapIf(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf(format+": %w", append(args, err)...)
}
