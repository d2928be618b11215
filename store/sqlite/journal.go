package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/marlowe-bot/marlowe/core"
)

const selectCommand = `SELECT seq, id, kind, v, actor_type, actor_id, actor_platform,
	platform, workspace, channel_id, thread, run, cause, at,
	payload, redacted, payload_hash, prev, key_id, sig FROM commands `

const insertCommand = `INSERT INTO commands (channel, seq, id, kind, v,
	actor_type, actor_id, actor_platform, platform, workspace, channel_id, thread,
	run, cause, at, payload, redacted, payload_hash, prev, key_id, sig)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`

// Append seals drafts after the channel's head and writes them in one
// BEGIN IMMEDIATE transaction: the write lock is taken before the head is
// read, so no other connection or process can append in between.
func (s *Store) Append(ctx context.Context, drafts ...core.Draft) ([]core.Command, error) {
	return s.append(ctx, nil, drafts)
}

// AppendAt appends only at the expected head and, with a fence, only while
// the fence's lease token is current; both are read inside the write
// transaction, so nothing can move them before the insert.
func (s *Store) AppendAt(ctx context.Context, exp core.Expect, drafts ...core.Draft) ([]core.Command, error) {
	return s.append(ctx, &exp, drafts)
}

// append is Append (exp nil) and AppendAt.
func (s *Store) append(ctx context.Context, exp *core.Expect, drafts []core.Draft) ([]core.Command, error) {
	ch, err := core.CheckBatch(drafts)
	if err != nil {
		return nil, fmt.Errorf("append: %w", err)
	}
	if s.signer == nil {
		return nil, fmt.Errorf("append to %s: %w", ch, core.ErrReadOnly)
	}
	var out []core.Command
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		seq, prev, err := readHead(ctx, tx, ch)
		if err != nil {
			return err
		}
		if exp != nil {
			if err := checkExpect(ctx, tx, seq, *exp); err != nil {
				return err
			}
		}
		out, err = s.write(ctx, tx, ch, seq, prev, drafts)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("append %d command(s) to %s: %w", len(drafts), ch, err)
	}
	return out, nil
}

// checkExpect refuses an append whose expected head or lease fence no
// longer holds, inside the write transaction.
func checkExpect(ctx context.Context, tx *sql.Tx, head uint64, exp core.Expect) error {
	if head != exp.Head {
		return fmt.Errorf("expected head %d, journal head is %d: %w", exp.Head, head, core.ErrHeadMoved)
	}
	if exp.Fence == nil {
		return nil
	}
	var token int64
	if err := tx.QueryRowContext(ctx, `SELECT coalesce((SELECT token FROM leases WHERE name = ?), 0)`, exp.Fence.Name).Scan(&token); err != nil {
		return fmt.Errorf("read lease: %w", err)
	}
	if token != exp.Fence.Token {
		return fmt.Errorf("lease %s: fence %d, current %d: %w", exp.Fence.Name, exp.Fence.Token, token, core.ErrFenced)
	}
	return nil
}

// inTx runs fn in a write transaction on the store's write connection.
func (s *Store) inTx(ctx context.Context, fn func(*sql.Tx) error) error {
	return writeTx(ctx, s.w, fn)
}

// writeTx runs fn in a write transaction on w (BEGIN IMMEDIATE, see dsn)
// and commits when it returns nil.
func writeTx(ctx context.Context, w *sql.DB, fn func(*sql.Tx) error) error {
	tx, err := w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if err := fn(tx); err != nil {
		return errors.Join(err, ignoreDone(tx.Rollback()))
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// ignoreDone drops the error of rolling back a transaction the driver has
// already ended (a cancelled context rolls back on its own).
func ignoreDone(err error) error {
	if errors.Is(err, sql.ErrTxDone) {
		return nil
	}
	return err
}

func readHead(ctx context.Context, q querier, ch core.ChannelKey) (uint64, core.Hash, error) {
	var seq int64
	var hash []byte
	err := q.QueryRowContext(ctx, `SELECT seq, hash FROM channel_heads WHERE channel = ?`, string(ch)).Scan(&seq, &hash)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, core.Hash{}, nil
	}
	if err != nil {
		return 0, core.Hash{}, fmt.Errorf("read head: %w", err)
	}
	var h core.Hash
	if len(hash) != len(h) || seq < 0 {
		return 0, core.Hash{}, fmt.Errorf("read head: corrupt head row (seq %d)", seq)
	}
	copy(h[:], hash)
	return uint64(seq), h, nil
}

type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// write seals drafts after (seq, prev), inserts them and moves the head.
func (s *Store) write(ctx context.Context, tx *sql.Tx, ch core.ChannelKey, seq uint64, prev core.Hash, drafts []core.Draft) ([]core.Command, error) {
	ins, err := tx.PrepareContext(ctx, insertCommand)
	if err != nil {
		return nil, fmt.Errorf("prepare insert: %w", err)
	}
	defer ins.Close()
	out := make([]core.Command, 0, len(drafts))
	for _, d := range drafts {
		seq++
		c, err := s.signer.Seal(d, seq, prev)
		if err != nil {
			return nil, fmt.Errorf("seal seq %d: %w", seq, err)
		}
		prev = c.Hash()
		r := c.Record()
		if _, err := ins.ExecContext(ctx, string(ch), int64(r.Seq), r.ID, r.Kind, r.V,
			string(r.Actor.Type), r.Actor.ID, r.Actor.Platform,
			r.Scope.Platform, r.Scope.Workspace, r.Scope.Channel, r.Scope.Thread,
			r.Run, r.Cause, r.At.UnixMicro(), payloadArg(r), r.Redacted, r.PayloadHash, r.Prev, r.Key, r.Sig); err != nil {
			return nil, fmt.Errorf("insert seq %d: %w", r.Seq, describe(err))
		}
		out = append(out, c)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO channel_heads (channel, seq, hash) VALUES (?, ?, ?)
		ON CONFLICT (channel) DO UPDATE SET seq = excluded.seq, hash = excluded.hash`,
		string(ch), int64(seq), prev[:]); err != nil {
		return nil, fmt.Errorf("move head: %w", err)
	}
	return out, nil
}

// payloadArg stores a payload as a BLOB; an empty payload must not become
// NULL, which means redacted.
func payloadArg(r core.Record) any {
	if r.Redacted {
		return nil
	}
	if r.Payload == nil {
		return []byte{}
	}
	return r.Payload
}

// describe names the constraint behind a failed insert.
func describe(err error) error {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "commands.id"):
		return fmt.Errorf("command id already journaled: %w", err)
	case strings.Contains(msg, "commands.channel, commands.seq"):
		return fmt.Errorf("seq already taken (head row out of step with commands): %w", err)
	}
	return err
}

// Read returns up to limit commands of ch from seq from on.
func (s *Store) Read(ctx context.Context, ch core.ChannelKey, from uint64, limit int) ([]core.Command, error) {
	lim := int64(-1) // SQLite: negative is no limit
	if limit > 0 {
		lim = int64(limit)
	}
	cmds, err := query(ctx, s.r, selectCommand+`WHERE channel = ? AND seq >= ? ORDER BY seq LIMIT ?`,
		string(ch), clampSeq(from), lim)
	if err == nil {
		cmds, err = withRestated(ctx, s.r, cmds)
	}
	if err != nil {
		return nil, fmt.Errorf("read %s from %d: %w", ch, from, err)
	}
	return cmds, nil
}

// ReadRun returns a run's commands in (channel, seq) order.
func (s *Store) ReadRun(ctx context.Context, run string) ([]core.Command, error) {
	if run == "" {
		return nil, errors.New("read run: empty run id")
	}
	// run <> '' lets SQLite use the partial index.
	cmds, err := query(ctx, s.r, selectCommand+`WHERE run = ? AND run <> '' ORDER BY channel, seq`, run)
	if err == nil {
		cmds, err = withRestated(ctx, s.r, cmds)
	}
	if err != nil {
		return nil, fmt.Errorf("read run %s: %w", run, err)
	}
	return cmds, nil
}

// Channels lists channels from the head table rather than the commands, so
// a channel whose rows were all deleted is still listed (and fails verify).
func (s *Store) Channels(ctx context.Context) ([]core.ChannelKey, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT channel FROM channel_heads WHERE seq > 0 ORDER BY channel`)
	if err != nil {
		return nil, fmt.Errorf("list channels: %w", err)
	}
	defer rows.Close()
	var out []core.ChannelKey
	for rows.Next() {
		var ch string
		if err := rows.Scan(&ch); err != nil {
			return nil, fmt.Errorf("list channels: %w", err)
		}
		out = append(out, core.ChannelKey(ch))
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list channels: %w", err)
	}
	return out, nil
}

// Head returns the seq and hash recorded by the last append to ch.
func (s *Store) Head(ctx context.Context, ch core.ChannelKey) (uint64, core.Hash, error) {
	seq, h, err := readHead(ctx, s.r, ch)
	if err != nil {
		return 0, core.Hash{}, fmt.Errorf("head of %s: %w", ch, err)
	}
	return seq, h, nil
}

// Redact destroys the payload bytes of the command at seq and appends the
// command.redacted record, in one write transaction. secure_delete (see
// dsn) overwrites the freed bytes in the database file; the WAL copy of the
// old page goes at the next checkpoint.
func (s *Store) Redact(ctx context.Context, seq uint64, record core.Draft) (core.Command, error) {
	return s.redact(ctx, seq, nil, record)
}

// Restate implements core.Restater: Redact, and the restatement is kept in
// the restated table in the same transaction.
func (s *Store) Restate(ctx context.Context, seq uint64, payload []byte, record core.Draft) (core.Command, error) {
	if payload == nil {
		return core.Command{}, fmt.Errorf("restate seq %d: no payload", seq)
	}
	return s.redact(ctx, seq, payload, record)
}

func (s *Store) redact(ctx context.Context, seq uint64, restated []byte, record core.Draft) (core.Command, error) {
	ch, err := core.CheckBatch([]core.Draft{record})
	if err != nil {
		return core.Command{}, fmt.Errorf("redact: %w", err)
	}
	if s.signer == nil {
		return core.Command{}, fmt.Errorf("redact %s seq %d: %w", ch, seq, core.ErrReadOnly)
	}
	var out []core.Command
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		head, prev, err := readHead(ctx, tx, ch)
		if err != nil {
			return err
		}
		targets, err := query(ctx, tx, selectCommand+`WHERE channel = ? AND seq = ?`, string(ch), clampSeq(seq))
		if err != nil {
			return fmt.Errorf("read target: %w", err)
		}
		if len(targets) == 0 {
			return fmt.Errorf("target seq %d: %w", seq, core.ErrNotFound)
		}
		if targets[0].Redacted() {
			return fmt.Errorf("target seq %d is already redacted", seq)
		}
		check := core.CheckRedaction(targets[0], record)
		if restated != nil {
			check = core.CheckRestatement(targets[0], restated, record)
		}
		if check != nil {
			return check
		}
		if _, err := tx.ExecContext(ctx, `UPDATE commands SET payload = NULL, redacted = 1 WHERE channel = ? AND seq = ?`,
			string(ch), int64(seq)); err != nil {
			return fmt.Errorf("destroy payload: %w", err)
		}
		if restated != nil {
			if _, err := tx.ExecContext(ctx, `INSERT INTO restated (channel, seq, payload) VALUES (?, ?, ?)`,
				string(ch), int64(seq), restated); err != nil {
				return fmt.Errorf("keep restatement: %w", err)
			}
		}
		out, err = s.write(ctx, tx, ch, head, prev, []core.Draft{record})
		return err
	})
	if err != nil {
		return core.Command{}, fmt.Errorf("redact %s seq %d: %w", ch, seq, err)
	}
	return out[0], nil
}

// withRestated puts the kept restatement in place of each redacted command
// of cmds that has one: one range query per channel of the page.
func withRestated(ctx context.Context, q querier, cmds []core.Command) ([]core.Command, error) {
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
		rows, err := q.QueryContext(ctx, `SELECT seq, payload FROM restated WHERE channel = ? AND seq BETWEEN ? AND ?`,
			string(ch), clampSeq(sp.lo), clampSeq(sp.hi))
		if err != nil {
			return nil, fmt.Errorf("read restatements of %s: %w", ch, err)
		}
		kept := map[uint64][]byte{}
		for rows.Next() {
			var seq int64
			var p []byte
			if err := rows.Scan(&seq, &p); err != nil {
				rows.Close()
				return nil, fmt.Errorf("read restatements of %s: %w", ch, err)
			}
			kept[uint64(seq)] = p
		}
		rows.Close()
		if err := rows.Err(); err != nil {
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

// query loads rows into Commands. It checks shape only: trust is decided by
// verification.
func query(ctx context.Context, q querier, sqlText string, args ...any) ([]core.Command, error) {
	rows, err := q.QueryContext(ctx, sqlText, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []core.Command
	for rows.Next() {
		var (
			r         core.Record
			seq, at   int64
			actorType string
		)
		if err := rows.Scan(&seq, &r.ID, &r.Kind, &r.V, &actorType, &r.Actor.ID, &r.Actor.Platform,
			&r.Scope.Platform, &r.Scope.Workspace, &r.Scope.Channel, &r.Scope.Thread, &r.Run, &r.Cause, &at,
			&r.Payload, &r.Redacted, &r.PayloadHash, &r.Prev, &r.Key, &r.Sig); err != nil {
			return nil, fmt.Errorf("scan command: %w", err)
		}
		r.Seq, r.Actor.Type, r.At = uint64(seq), core.ActorType(actorType), time.UnixMicro(at).UTC()
		c, err := core.FromRecord(r)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// clampSeq maps a uint64 seq onto SQLite's int64; nothing is stored above
// MaxInt64.
func clampSeq(seq uint64) int64 {
	if seq > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(seq)
}
