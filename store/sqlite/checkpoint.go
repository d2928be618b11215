package sqlite

import (
	"context"
	"fmt"

	"github.com/marlowe-bot/marlowe/core"
)

var _ core.LatestReader = (*Store)(nil)

// LatestOfKind returns ch's latest unredacted command of kind. The kind is
// written into the SQL literally (it is one of core's closed set of names)
// so that SQLite can use the partial index of migration 00010 for
// fold.checkpoint.
func (s *Store) LatestOfKind(ctx context.Context, ch core.ChannelKey, kind core.Kind) (core.Command, bool, error) {
	if !kind.Valid() {
		return core.Command{}, false, fmt.Errorf("latest of kind %d in %s: invalid kind", kind, ch)
	}
	cmds, err := query(ctx, s.r, selectCommand+fmt.Sprintf(`WHERE channel = ? AND kind = '%s' AND redacted = 0 ORDER BY seq DESC LIMIT 1`, kind), string(ch))
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
