package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/marlowe-bot/marlowe/core"
)

// Restate implements core.Restater: Redact, and the restatement is kept in
// the restated table in the same transaction.
func (s *Store) Restate(ctx context.Context, seq uint64, payload []byte, record core.Draft) (core.Command, error) {
	if payload == nil {
		return core.Command{}, fmt.Errorf("restate seq %d: no payload", seq)
	}
	return s.redact(ctx, seq, payload, record)
}

// redact destroys the payload bytes of the command at seq (keeping restated
// in its place when set) and appends the command.redacted record, in one
// transaction under the head lock.
//
// The row's old version stays in PostgreSQL's dead tuples and WAL until
// vacuum and WAL recycling remove it.
func (s *Store) redact(ctx context.Context, seq uint64, restated []byte, record core.Draft) (core.Command, error) {
	ch, err := core.CheckBatch([]core.Draft{record})
	if err != nil {
		return core.Command{}, fmt.Errorf("redact: %w", err)
	}
	if s.signer == nil {
		return core.Command{}, fmt.Errorf("redact %s seq %d: %w", ch, seq, core.ErrReadOnly)
	}
	if seq == 0 {
		return core.Command{}, fmt.Errorf("redact %s seq 0: %w", ch, core.ErrNotFound)
	}
	h := s.heads.get(ch)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.known = false // the redaction record moves the head; re-read it next time
	out, err := s.appendTx(ctx, ch, []int64{clampSeq(seq)}, nil, func(targets []core.Command) (*pgx.Batch, []core.Draft, error) {
		if len(targets) == 0 {
			return nil, nil, fmt.Errorf("target seq %d: %w", seq, core.ErrNotFound)
		}
		if targets[0].Redacted() {
			return nil, nil, fmt.Errorf("target seq %d is already redacted", seq)
		}
		check := core.CheckRedaction(targets[0], record)
		if restated != nil {
			check = core.CheckRestatement(targets[0], restated, record)
		}
		if check != nil {
			return nil, nil, check
		}
		b := &pgx.Batch{}
		b.Queue(`UPDATE commands SET payload = NULL, redacted = true WHERE channel = $1 AND seq = $2`, string(ch), int64(seq))
		if restated != nil {
			b.Queue(`INSERT INTO restated (channel, seq, payload) VALUES ($1, $2, $3)`, string(ch), int64(seq), restated)
		}
		return b, []core.Draft{record}, nil
	})
	if err != nil {
		return core.Command{}, fmt.Errorf("redact %s seq %d: %w", ch, seq, err)
	}
	return out[0], nil
}

// withRestated puts the kept restatement in place of each redacted command
// of cmds that has one: one range query per channel of the page.
func (s *Store) withRestated(ctx context.Context, cmds []core.Command) ([]core.Command, error) {
	type span struct{ lo, hi uint64 }
	spans := map[core.ChannelKey]*span{}
	for _, c := range cmds {
		if !c.Redacted() {
			continue
		}
		if sp := spans[c.Channel()]; sp == nil {
			spans[c.Channel()] = &span{c.Seq(), c.Seq()}
		} else {
			sp.lo, sp.hi = min(sp.lo, c.Seq()), max(sp.hi, c.Seq())
		}
	}
	for ch, sp := range spans {
		rows, err := s.pool.Query(ctx, `SELECT seq, payload FROM restated WHERE channel = $1 AND seq BETWEEN $2 AND $3`,
			string(ch), clampSeq(sp.lo), clampSeq(sp.hi))
		if err != nil {
			return nil, fmt.Errorf("read restatements of %s: %w", ch, err)
		}
		kept := map[uint64][]byte{}
		var seq int64
		var p []byte
		if _, err := pgx.ForEachRow(rows, []any{&seq, &p}, func() error {
			kept[uint64(seq)] = append([]byte(nil), p...)
			return nil
		}); err != nil {
			return nil, fmt.Errorf("read restatements of %s: %w", ch, err)
		}
		for i, c := range cmds {
			if p, ok := kept[c.Seq()]; ok && c.Channel() == ch && c.Redacted() {
				cmds[i] = c.WithRestatement(p)
			}
		}
	}
	return cmds, nil
}
