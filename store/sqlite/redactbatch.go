package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/marlowe-bot/marlowe/core"
)

var (
	_ core.BatchRedactor = (*Store)(nil)
	_ core.AuthorIndex   = (*Store)(nil)
)

// RedactBatch implements core.BatchRedactor: every target is read and
// checked, its payload destroyed, and every record appended, in one
// BEGIN IMMEDIATE transaction, so a batch costs one durable commit.
func (s *Store) RedactBatch(ctx context.Context, reds []core.Redaction) ([]core.Command, error) {
	ch, err := core.CheckRedactions(reds)
	if err != nil {
		return nil, err
	}
	if s.signer == nil {
		return nil, fmt.Errorf("redact %d in %s: %w", len(reds), ch, core.ErrReadOnly)
	}
	var out []core.Command
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		head, prev, err := readHead(ctx, tx, ch)
		if err != nil {
			return err
		}
		destroy, err := tx.PrepareContext(ctx, `UPDATE commands SET payload = NULL, redacted = 1 WHERE channel = ? AND seq = ?`)
		if err != nil {
			return fmt.Errorf("prepare destroy: %w", err)
		}
		defer destroy.Close()
		var records []core.Draft
		for _, r := range reds {
			targets, err := query(ctx, tx, selectCommand+`WHERE channel = ? AND seq = ?`, string(ch), clampSeq(r.Seq))
			if err != nil {
				return fmt.Errorf("read target %d: %w", r.Seq, err)
			}
			if len(targets) == 0 {
				return fmt.Errorf("target seq %d: %w", r.Seq, core.ErrNotFound)
			}
			if targets[0].Redacted() {
				continue // redacted already, with its own record
			}
			if err := core.CheckRedaction(targets[0], r.Record); err != nil {
				return err
			}
			if _, err := destroy.ExecContext(ctx, string(ch), int64(r.Seq)); err != nil {
				return fmt.Errorf("destroy payload of seq %d: %w", r.Seq, err)
			}
			records = append(records, r.Record)
		}
		if len(records) == 0 {
			return nil
		}
		out, err = s.write(ctx, tx, ch, head, prev, records)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("redact %d in %s: %w", len(reds), ch, err)
	}
	return out, nil
}

// messagesBy is MessagesBy's query: the partial index's conditions are
// written literally, so SQLite uses it (TestMessagesByUsesTheIndex).
const messagesBy = `WHERE kind = 'message.received' AND actor_type = 'human' AND redacted = 0
	AND actor_platform = ? AND actor_id = ? ORDER BY channel, seq`

// MessagesBy implements core.AuthorIndex from the partial index of
// migration 00014.
func (s *Store) MessagesBy(ctx context.Context, platform, person string) ([]core.Command, error) {
	cmds, err := query(ctx, s.r, selectCommand+messagesBy, platform, person)
	if err != nil {
		return nil, fmt.Errorf("messages by %s/%s: %w", platform, person, err)
	}
	return cmds, nil
}
