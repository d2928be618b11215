package postgres

import (
	"context"
	"fmt"

	"github.com/marlowe-bot/marlowe/core"
)

var _ core.LatestReader = (*Store)(nil)

// LatestOfKind returns ch's latest unredacted command of kind. The kind is
// written into the SQL literally (it is one of core's closed set of names):
// a parameter would keep a generic plan from matching the partial index of
// migration 00010 for fold.checkpoint.
func (s *Store) LatestOfKind(ctx context.Context, ch core.ChannelKey, kind core.Kind) (core.Command, bool, error) {
	if !kind.Valid() {
		return core.Command{}, false, fmt.Errorf("latest of kind %d in %s: invalid kind", kind, ch)
	}
	rows, err := s.pool.Query(ctx, selectCommand+fmt.Sprintf(`WHERE channel = $1 AND kind = '%s' AND NOT redacted ORDER BY seq DESC LIMIT 1`, kind), string(ch))
	if err != nil {
		return core.Command{}, false, fmt.Errorf("latest %s of %s: %w", kind, ch, err)
	}
	cmds, err := collect(rows)
	if err != nil {
		return core.Command{}, false, fmt.Errorf("latest %s of %s: %w", kind, ch, err)
	}
	if len(cmds) == 0 {
		return core.Command{}, false, nil
	}
	return cmds[0], true, nil
}

// Verifier checks commands against the key this store seals with (the
// engine verifies a checkpoint with it before restoring one); nil when the
// store was opened read-only.
func (s *Store) Verifier() *core.Verifier {
	if s.signer == nil {
		return nil
	}
	return s.signer.Verifier()
}
