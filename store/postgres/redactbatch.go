package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/marlowe-bot/marlowe/core"
)

var (
	_ core.BatchRedactor = (*Store)(nil)
	_ core.AuthorIndex   = (*Store)(nil)
)

// RedactBatch implements core.BatchRedactor: the targets are read under
// the head lock, checked, destroyed and every record appended in one
// transaction (two round trips, as one Redact), so a batch costs one
// durable commit.
func (s *Store) RedactBatch(ctx context.Context, reds []core.Redaction) ([]core.Command, error) {
	ch, err := core.CheckRedactions(reds)
	if err != nil {
		return nil, err
	}
	if s.signer == nil {
		return nil, fmt.Errorf("redact %d in %s: %w", len(reds), ch, core.ErrReadOnly)
	}
	seqs := make([]int64, len(reds))
	for i, r := range reds {
		if r.Seq == 0 {
			return nil, fmt.Errorf("redact %s seq 0: %w", ch, core.ErrNotFound)
		}
		seqs[i] = clampSeq(r.Seq)
	}
	h := s.heads.get(ch)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.known = false // the records move the head; re-read it next time
	out, err := s.appendTx(ctx, ch, seqs, nil, func(targets []core.Command) (*pgx.Batch, []core.Draft, error) {
		bySeq := make(map[uint64]core.Command, len(targets))
		for _, t := range targets {
			bySeq[t.Seq()] = t
		}
		b := &pgx.Batch{}
		var records []core.Draft
		var destroy []int64
		for _, r := range reds {
			t, ok := bySeq[r.Seq]
			if !ok {
				return nil, nil, fmt.Errorf("target seq %d: %w", r.Seq, core.ErrNotFound)
			}
			if t.Redacted() {
				continue // redacted already, with its own record
			}
			if err := core.CheckRedaction(t, r.Record); err != nil {
				return nil, nil, err
			}
			destroy, records = append(destroy, int64(r.Seq)), append(records, r.Record)
		}
		if len(destroy) > 0 {
			b.Queue(`UPDATE commands SET payload = NULL, redacted = true WHERE channel = $1 AND seq = ANY($2)`, string(ch), destroy)
		}
		return b, records, nil
	})
	if err != nil {
		return nil, fmt.Errorf("redact %d in %s: %w", len(reds), ch, err)
	}
	return out, nil
}

// messagesBy is MessagesBy's selection (TestMessagesByUsesTheIndex).
const messagesBy = `WHERE kind = 'message.received' AND actor_type = 'human' AND NOT redacted
	AND actor_platform = $1 AND actor_id = $2 ORDER BY channel, seq`

// MessagesBy implements core.AuthorIndex from the partial index of
// migration 00014.
func (s *Store) MessagesBy(ctx context.Context, platform, person string) ([]core.Command, error) {
	rows, err := s.pool.Query(ctx, selectCommand+messagesBy, platform, person)
	if err != nil {
		return nil, fmt.Errorf("messages by %s/%s: %w", platform, person, err)
	}
	cmds, err := collect(rows)
	if err != nil {
		return nil, fmt.Errorf("messages by %s/%s: %w", platform, person, err)
	}
	return cmds, nil
}
