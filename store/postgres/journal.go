package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/marlowe-bot/marlowe/core"
)

const selectCommand = `SELECT seq, id, kind, v, actor_type, actor_id, actor_platform,
	platform, workspace, channel_id, thread, run, cause, at,
	payload, redacted, payload_hash, prev, key_id, sig FROM commands `

const insertCommand = `INSERT INTO commands (channel, seq, id, kind, v,
	actor_type, actor_id, actor_platform, platform, workspace, channel_id, thread,
	run, cause, at, payload, redacted, payload_hash, prev, key_id, sig)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21)`

// Append seals drafts after the channel's head and writes them in one
// transaction. The head row lock serialises appenders to one channel across
// every connection and process; UNIQUE (channel, seq) backs it up.
func (s *Store) Append(ctx context.Context, drafts ...core.Draft) ([]core.Command, error) {
	return s.append(ctx, nil, drafts)
}

// AppendAt appends only at the expected head and, with a fence, only while
// the fence's lease token is current.
func (s *Store) AppendAt(ctx context.Context, exp core.Expect, drafts ...core.Draft) ([]core.Command, error) {
	return s.append(ctx, &exp, drafts)
}

// append is Append (exp nil) and AppendAt. A writer that knows the head
// it wrote last (and needs no fence checked) takes the one-round-trip
// path; otherwise the head row is locked and read (appendTx).
func (s *Store) append(ctx context.Context, exp *core.Expect, drafts []core.Draft) ([]core.Command, error) {
	ch, err := core.CheckBatch(drafts)
	if err != nil {
		return nil, fmt.Errorf("append: %w", err)
	}
	if s.signer == nil {
		return nil, fmt.Errorf("append to %s: %w", ch, core.ErrReadOnly)
	}
	h := s.heads.get(ch)
	h.mu.Lock()
	defer h.mu.Unlock()
	var fence *core.Fence
	if exp != nil {
		fence = exp.Fence
	}
	if h.known && (exp == nil || h.seq == exp.Head) {
		out, err := s.appendAfter(ctx, ch, h.seq, h.hash, fence, drafts)
		if err == nil {
			h.set(out[len(out)-1])
			return out, nil
		}
		h.known = false
		switch {
		case errors.Is(err, errFenced):
			return nil, fmt.Errorf("append %d command(s) to %s: lease %s: fence %d is not current: %w", len(drafts), ch, fence.Name, fence.Token, core.ErrFenced)
		case !errors.Is(err, errHeadMoved):
			return nil, fmt.Errorf("append %d command(s) to %s: %w", len(drafts), ch, err)
		case exp != nil:
			return nil, fmt.Errorf("append %d command(s) to %s at head %d: %w", len(drafts), ch, exp.Head, core.ErrHeadMoved)
		}
		// Another writer appended since: take the lock and read the head.
	}
	out, err := s.appendTx(ctx, ch, nil, exp, func([]core.Command) (*pgx.Batch, []core.Draft, error) { return &pgx.Batch{}, drafts, nil })
	if err != nil {
		return nil, fmt.Errorf("append %d command(s) to %s: %w", len(drafts), ch, err)
	}
	h.set(out[len(out)-1])
	return out, nil
}

// NotifyChannel is the LISTEN/NOTIFY channel every unfenced append
// notifies, with "<seq> <channel key>" as payload, when it commits: how the
// replica that owns a channel learns that another replica journaled
// something there. A fenced append notifies nobody: it commits only while
// its writer holds the channel's lease, and only the holder acts on a
// notification (a replica that takes the lease over folds the journal
// first). A NOTIFY also serialises the commits of every notifying
// transaction on one server-wide lock, so a run's steps skip it.
const NotifyChannel = "marlowe_journal"

func queueNotify(b *pgx.Batch, ch core.ChannelKey, seq uint64, fence *core.Fence) {
	if fence != nil {
		return
	}
	b.Queue(`SELECT pg_notify($1, $2)`, NotifyChannel, strconv.FormatUint(seq, 10)+" "+string(ch))
}

// errHeadMoved: the head this process last wrote is no longer the head.
var errHeadMoved = errors.New("channel head moved")

// errFenced: the fence's lease token is no longer current.
var errFenced = errors.New("fence not current")

// appendAfter is the one-round-trip append for a writer that knows the
// head it wrote last: it moves the head row from (seq, hash) to the new end
// and inserts, in one transaction. When another writer appended meanwhile,
// the head row no longer matches, the statement fails on purpose and
// nothing is written (UNIQUE (channel, seq) would refuse the insert too).
//
// With a fence, the same round trip checks the lease token (FOR SHARE, as
// appendTx does: a takeover of the lease waits for this append to end) and
// fails the transaction when it is not current.
func (s *Store) appendAfter(ctx context.Context, ch core.ChannelKey, head uint64, prev core.Hash, fence *core.Fence, drafts []core.Draft) (_ []core.Command, err error) {
	start := prev
	out := make([]core.Command, 0, len(drafts))
	seq := head
	for _, d := range drafts {
		seq++
		c, err := s.signer.Seal(d, seq, prev)
		if err != nil {
			return nil, fmt.Errorf("seal seq %d: %w", seq, err)
		}
		prev = c.Hash()
		out = append(out, c)
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("acquire connection: %w", err)
	}
	defer release(ctx, conn, &err)
	b := &pgx.Batch{}
	b.Queue(`BEGIN`)
	// 1/count(*) divides by zero when no head row matched: an error is the
	// only way to stop the rest of a pipelined transaction server-side.
	b.Queue(`WITH moved AS (
		UPDATE channel_heads SET seq = $2, hash = $3 WHERE channel = $1 AND seq = $4 AND hash = $5 RETURNING 1)
		SELECT 1 / count(*) FROM moved`, string(ch), int64(seq), prev[:], int64(head), start[:])
	const fenceAt = 2 // the statement index of the fence check
	if fence != nil {
		b.Queue(`SELECT 1 / count(*) FROM (SELECT 1 FROM leases WHERE name = $1 AND token = $2 FOR SHARE) l`, fence.Name, fence.Token)
	}
	for _, c := range out {
		queueInsert(b, ch, c.Record())
	}
	queueNotify(b, ch, seq, fence)
	b.Queue(`COMMIT`)
	if at, err := execAllAt(conn.SendBatch(ctx, b), b.Len()); err != nil {
		var pgErr *pgconn.PgError
		switch {
		case fence != nil && at == fenceAt && errors.As(err, &pgErr) && pgErr.Code == "22012":
			return nil, errFenced
		case errors.As(err, &pgErr) && (pgErr.Code == "22012" || pgErr.Code == "23505"):
			return nil, errHeadMoved
		}
		return nil, err
	}
	return out, nil
}

// headCache remembers, per channel, the head this process last wrote, so
// the next append by the same writer needs one round trip instead of two.
type headCache struct {
	mu sync.Mutex
	m  map[core.ChannelKey]*cachedHead
}

// cachedHead is one channel's head as last written here; its mutex also
// serialises this process's appends to the channel.
type cachedHead struct {
	mu    sync.Mutex
	known bool
	seq   uint64
	hash  core.Hash
}

func (c *headCache) get(ch core.ChannelKey) *cachedHead {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[core.ChannelKey]*cachedHead{}
	}
	h := c.m[ch]
	if h == nil {
		h = &cachedHead{}
		c.m[ch] = h
	}
	return h
}

func (h *cachedHead) set(last core.Command) {
	h.known, h.seq, h.hash = true, last.Seq(), last.Hash()
}

// appendTx runs one append transaction in two round trips, which is most of
// the cost of an append:
//
//  1. BEGIN, create the channel's head row if new, lock it (FOR UPDATE) and
//     read it, and read the commands at targets (if any);
//  2. what before returns (given the target read in 1), the sealed inserts,
//     the head update and COMMIT.
//
// A failure anywhere leaves the transaction open and it is rolled back.
func (s *Store) appendTx(ctx context.Context, ch core.ChannelKey, targets []int64, exp *core.Expect, before func(targets []core.Command) (*pgx.Batch, []core.Draft, error)) (_ []core.Command, err error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("acquire connection: %w", err)
	}
	defer release(ctx, conn, &err)

	var zero core.Hash
	b := &pgx.Batch{}
	b.Queue(`BEGIN`)
	b.Queue(`INSERT INTO channel_heads (channel, seq, hash) VALUES ($1, 0, $2) ON CONFLICT (channel) DO NOTHING`, string(ch), zero[:])
	b.Queue(`SELECT seq, hash FROM channel_heads WHERE channel = $1 FOR UPDATE`, string(ch))
	if len(targets) > 0 {
		b.Queue(selectCommand+`WHERE channel = $1 AND seq = ANY($2) ORDER BY seq`, string(ch), targets)
	}
	fenced := exp != nil && exp.Fence != nil
	if fenced {
		// FOR SHARE: a takeover of the lease waits for this append to end,
		// so the new holder's first read sees it.
		b.Queue(`SELECT coalesce((SELECT token FROM leases WHERE name = $1 FOR SHARE), 0)`, exp.Fence.Name)
	}
	head, prev, read, token, err := readLocked(conn.SendBatch(ctx, b), len(targets) > 0, fenced)
	if err != nil {
		return nil, err
	}
	if exp != nil && head != exp.Head {
		return nil, fmt.Errorf("expected head %d, journal head is %d: %w", exp.Head, head, core.ErrHeadMoved)
	}
	if fenced && token != exp.Fence.Token {
		return nil, fmt.Errorf("lease %s: fence %d, current %d: %w", exp.Fence.Name, exp.Fence.Token, token, core.ErrFenced)
	}

	b, drafts, err := before(read)
	if err != nil {
		return nil, err
	}
	if len(drafts) == 0 { // a batched redaction that found every target redacted
		b.Queue(`COMMIT`)
		return nil, execAll(conn.SendBatch(ctx, b), b.Len())
	}
	out := make([]core.Command, 0, len(drafts))
	seq := head
	for _, d := range drafts {
		seq++
		c, err := s.signer.Seal(d, seq, prev)
		if err != nil {
			return nil, fmt.Errorf("seal seq %d: %w", seq, err)
		}
		prev = c.Hash()
		out = append(out, c)
		queueInsert(b, ch, c.Record())
	}
	b.Queue(`UPDATE channel_heads SET seq = $2, hash = $3 WHERE channel = $1`, string(ch), int64(seq), prev[:])
	var fence *core.Fence
	if fenced {
		fence = exp.Fence
	}
	queueNotify(b, ch, seq, fence)
	b.Queue(`COMMIT`)
	if err := execAll(conn.SendBatch(ctx, b), b.Len()); err != nil {
		return nil, err
	}
	return out, nil
}

// release returns conn to the pool, first rolling back a transaction that
// *err left open, so the pool gets a clean connection; if even that fails the
// pool closes the connection, which aborts the transaction.
func release(ctx context.Context, conn *pgxpool.Conn, err *error) {
	if *err != nil && conn.Conn().PgConn().TxStatus() != 'I' {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		_, _ = conn.Exec(rctx, "ROLLBACK")
		cancel()
	}
	conn.Release()
}

func queueInsert(b *pgx.Batch, ch core.ChannelKey, r core.Record) {
	b.Queue(insertCommand, string(ch), int64(r.Seq), r.ID, r.Kind, r.V,
		string(r.Actor.Type), r.Actor.ID, r.Actor.Platform,
		r.Scope.Platform, r.Scope.Workspace, r.Scope.Channel, r.Scope.Thread,
		r.Run, r.Cause, r.At.UTC(), payloadArg(r), r.Redacted, r.PayloadHash, r.Prev, r.Key, r.Sig)
}

// readLocked reads the results of appendTx's first round trip.
func readLocked(res pgx.BatchResults, withTarget, withFence bool) (seq uint64, prev core.Hash, targets []core.Command, token int64, err error) {
	defer func() {
		if cerr := res.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("lock head: %w", cerr)
		}
	}()
	if _, err := res.Exec(); err != nil {
		return 0, prev, nil, 0, fmt.Errorf("begin: %w", err)
	}
	if _, err := res.Exec(); err != nil {
		return 0, prev, nil, 0, fmt.Errorf("create head: %w", err)
	}
	var head int64
	var hash []byte
	if err := res.QueryRow().Scan(&head, &hash); err != nil {
		return 0, prev, nil, 0, fmt.Errorf("lock head: %w", err)
	}
	if prev, err = toHash(hash); err != nil || head < 0 {
		return 0, prev, nil, 0, fmt.Errorf("lock head: corrupt head row (seq %d)", head)
	}
	if withTarget {
		rows, err := res.Query()
		if err != nil {
			return 0, prev, nil, 0, fmt.Errorf("read target: %w", err)
		}
		if targets, err = collect(rows); err != nil {
			return 0, prev, nil, 0, fmt.Errorf("read target: %w", err)
		}
	}
	if withFence {
		if err := res.QueryRow().Scan(&token); err != nil {
			return 0, prev, nil, 0, fmt.Errorf("read lease: %w", err)
		}
	}
	return uint64(head), prev, targets, token, nil
}

// execAll reads n statement results and checks the last, COMMIT, really
// committed (a COMMIT of a failed transaction reports ROLLBACK).
func execAll(res pgx.BatchResults, n int) error {
	_, err := execAllAt(res, n)
	return err
}

// execAllAt is execAll that also says which statement failed (-1: none,
// or the close).
func execAllAt(res pgx.BatchResults, n int) (at int, err error) {
	at = -1
	defer func() {
		if cerr := res.Close(); err == nil && cerr != nil {
			err = cerr
		}
	}()
	for i := range n {
		tag, err := res.Exec()
		if err != nil {
			return i, fmt.Errorf("write: %w", describe(err))
		}
		if i == n-1 && tag.String() != "COMMIT" {
			return i, fmt.Errorf("commit: server answered %q", tag.String())
		}
	}
	return -1, nil
}

// payloadArg stores a payload as bytea; an empty payload must not become
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

// describe names the constraint behind a failed write.
func describe(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" {
		switch pgErr.ConstraintName {
		case "commands_id_key":
			return fmt.Errorf("command id already journaled: %w", err)
		case "commands_pkey":
			return fmt.Errorf("seq already taken (head row out of step with commands): %w", err)
		}
	}
	return err
}

// Read returns up to limit commands of ch from seq from on.
func (s *Store) Read(ctx context.Context, ch core.ChannelKey, from uint64, limit int) ([]core.Command, error) {
	var lim any // NULL: no limit
	if limit > 0 {
		lim = limit
	}
	rows, err := s.pool.Query(ctx, selectCommand+`WHERE channel = $1 AND seq >= $2 ORDER BY seq LIMIT $3`,
		string(ch), clampSeq(from), lim)
	if err != nil {
		return nil, fmt.Errorf("read %s from %d: %w", ch, from, err)
	}
	cmds, err := collect(rows)
	if err == nil {
		cmds, err = s.withRestated(ctx, cmds)
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
	// run <> '' lets the planner use the partial index.
	rows, err := s.pool.Query(ctx, selectCommand+`WHERE run = $1 AND run <> '' ORDER BY channel, seq`, run)
	if err != nil {
		return nil, fmt.Errorf("read run %s: %w", run, err)
	}
	cmds, err := collect(rows)
	if err == nil {
		cmds, err = s.withRestated(ctx, cmds)
	}
	if err != nil {
		return nil, fmt.Errorf("read run %s: %w", run, err)
	}
	return cmds, nil
}

// Channels lists channels from the head table rather than the commands, so
// a channel whose rows were all deleted is still listed (and fails verify).
func (s *Store) Channels(ctx context.Context) ([]core.ChannelKey, error) {
	rows, err := s.pool.Query(ctx, `SELECT channel FROM channel_heads WHERE seq > 0 ORDER BY channel`)
	if err != nil {
		return nil, fmt.Errorf("list channels: %w", err)
	}
	chs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (core.ChannelKey, error) {
		var ch string
		err := r.Scan(&ch)
		return core.ChannelKey(ch), err
	})
	if err != nil {
		return nil, fmt.Errorf("list channels: %w", err)
	}
	return chs, nil
}

// Head returns the seq and hash recorded by the last append to ch.
func (s *Store) Head(ctx context.Context, ch core.ChannelKey) (uint64, core.Hash, error) {
	var seq int64
	var hash []byte
	err := s.pool.QueryRow(ctx, `SELECT seq, hash FROM channel_heads WHERE channel = $1`, string(ch)).Scan(&seq, &hash)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, core.Hash{}, nil
	}
	if err != nil {
		return 0, core.Hash{}, fmt.Errorf("read head of %s: %w", ch, err)
	}
	h, err := toHash(hash)
	if err != nil || seq < 0 {
		return 0, core.Hash{}, fmt.Errorf("read head of %s: corrupt head row (seq %d)", ch, seq)
	}
	return uint64(seq), h, nil
}

// Redact destroys the payload bytes of the command at seq and appends the
// command.redacted record, in one transaction under the head lock.
//
// The row's old version stays in PostgreSQL's dead tuples and WAL until
// vacuum and WAL recycling remove it.
func (s *Store) Redact(ctx context.Context, seq uint64, record core.Draft) (core.Command, error) {
	return s.redact(ctx, seq, nil, record)
}

// collect loads rows into Commands. It checks shape only: a row whose scope
// disagrees with its channel column is returned as stored and fails
// verification, which is where trust is decided.
func collect(rows pgx.Rows) ([]core.Command, error) {
	defer rows.Close()
	var out []core.Command
	for rows.Next() {
		var (
			r         core.Record
			seq       int64
			actorType string
			at        time.Time
		)
		if err := rows.Scan(&seq, &r.ID, &r.Kind, &r.V, &actorType, &r.Actor.ID, &r.Actor.Platform,
			&r.Scope.Platform, &r.Scope.Workspace, &r.Scope.Channel, &r.Scope.Thread, &r.Run, &r.Cause, &at,
			&r.Payload, &r.Redacted, &r.PayloadHash, &r.Prev, &r.Key, &r.Sig); err != nil {
			return nil, fmt.Errorf("scan command: %w", err)
		}
		r.Seq, r.Actor.Type, r.At = uint64(seq), core.ActorType(actorType), at
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

func toHash(b []byte) (core.Hash, error) {
	var h core.Hash
	if len(b) != len(h) {
		return h, fmt.Errorf("hash has %d bytes", len(b))
	}
	copy(h[:], b)
	return h, nil
}

// clampSeq maps a uint64 seq onto bigint; nothing is stored above MaxInt64.
func clampSeq(seq uint64) int64 {
	if seq > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(seq)
}
