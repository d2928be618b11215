package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/marlowe-bot/marlowe/core"
)

// The tail reads (core.Journal.Unfinished, Policies, PostsSince), none of
// which reads the whole journal: open runs come from open_runs (kept by
// triggers, migration 00004); the other subqueries start from a kind that
// commands_lifecycle_idx or commands_posted_at_idx holds and reach a run's
// other commands through commands_run_idx. The kinds are literals: the
// planner matches a partial index's predicate only against constants.
//
// Failed runs are settled here exactly (store/sqlite, which has no sha256,
// returns every failed run with its later posts and leaves it to core):
// only a failed run that owes an end notice not yet posted is returned, so
// the answer stays the size of the work in flight.

// owesNotice is the channel fold's rule for a failed run that owes an end
// notice (chanView.apply, run.failed): broken, or cancelled other than by
// being superseded.
const owesNotice = `(convert_from(f.payload, 'UTF8')::jsonb ->> 'status' = 'broken'
	     OR convert_from(f.payload, 'UTF8')::jsonb ->> 'status' = 'cancelled'
	        AND convert_from(f.payload, 'UTF8')::jsonb ->> 'cause' <> 'superseded by a new message in the thread')`

// endNoticeID is core.EffectID(f.channel, f.seq, 0) in SQL: the key the
// end notice of failed run f is posted with. TestUnfinishedSettlesFailedRuns
// keeps the two in step.
const endNoticeID = `'fx' || substr(encode(sha256(convert_to(f.channel, 'UTF8') || '\x00'::bytea
	  || convert_to(f.seq::text, 'UTF8') || '\x00'::bytea || '0'::bytea), 'hex'), 1, 24)`

// unfinishedSQL selects the (channel, seq) of what Journal.Unfinished returns.
const unfinishedSQL = `
	SELECT channel, seq FROM open_runs
	UNION
	SELECT f.channel, f.seq FROM commands f
	 WHERE f.kind = 'run.failed' AND NOT f.redacted AND f.run <> ''
	   AND ` + owesNotice + `
	   AND NOT EXISTS (SELECT 1 FROM commands p
	        WHERE p.run = f.run AND p.channel = f.channel AND p.seq > f.seq AND p.run <> ''
	          AND p.kind = 'message.posted' AND NOT p.redacted
	          AND convert_from(p.payload, 'UTF8')::jsonb ->> 'effect_id' = ` + endNoticeID + `)
	UNION
	SELECT a.channel, a.seq FROM commands a
	 WHERE a.kind = 'approval.requested' AND NOT a.redacted AND a.run <> ''
	   AND (SELECT count(*) FROM commands b WHERE b.kind = 'approval.requested' AND NOT b.redacted
	          AND b.run = a.run AND b.channel = a.channel)
	     > (SELECT count(*) FROM commands b WHERE b.kind = 'approval.resolved' AND NOT b.redacted
	          AND b.run = a.run AND b.channel = a.channel)`

// postsSinceSQL selects the (channel, seq) of what Journal.PostsSince
// returns; the placeholder is the time, written by the store.
const postsSinceSQL = `
	SELECT p.channel, p.seq FROM commands p
	 WHERE p.kind = 'message.posted' AND NOT p.redacted AND p.at >= %[1]s
	UNION
	SELECT r.channel, r.seq FROM (
	        SELECT DISTINCT channel, run FROM commands
	         WHERE kind = 'message.posted' AND NOT redacted AND at >= %[1]s AND run <> '') pr
	  JOIN commands r ON r.run = pr.run AND r.channel = pr.channel AND r.run <> ''
	 WHERE r.kind = 'message.received' AND NOT r.redacted
	UNION
	SELECT c.channel, c.seq FROM commands c
	 WHERE c.kind = 'policy.changed' AND NOT c.redacted
	   AND c.channel IN (SELECT channel FROM commands
	        WHERE kind = 'message.posted' AND NOT redacted AND at >= %[1]s)`

// policiesSQL selects the (channel, seq) of every policy.changed.
const policiesSQL = `
	SELECT channel, seq FROM commands WHERE kind = 'policy.changed' AND NOT redacted`

// itemChannelsSQL lists the channels of a platform holding an item
// command (Journal.ItemChannels); the kinds are the index's literals.
const itemChannelsSQL = `
	SELECT DISTINCT channel FROM commands
	 WHERE kind IN ('approval.requested', 'consent.granted', 'report.filed') AND NOT redacted
	   AND platform = $1 ORDER BY channel`

// tail reads the commands whose (channel, seq) picked selects.
func (s *Store) tail(ctx context.Context, what, picked string, args ...any) ([]core.Command, error) {
	rows, err := s.pool.Query(ctx, `WITH picked AS (`+picked+`) `+selectCommand+
		`WHERE (channel, seq) IN (SELECT channel, seq FROM picked) ORDER BY channel, seq`, args...)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", what, err)
	}
	cmds, err := collect(rows)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", what, err)
	}
	return cmds, nil
}

// Unfinished implements core.Journal.
func (s *Store) Unfinished(ctx context.Context) ([]core.Command, error) {
	return s.tail(ctx, "unfinished work", unfinishedSQL)
}

// Policies implements core.Journal.
func (s *Store) Policies(ctx context.Context) ([]core.Command, error) {
	return s.tail(ctx, "policies", policiesSQL)
}

// PostsSince implements core.Journal.
func (s *Store) PostsSince(ctx context.Context, since time.Time) ([]core.Command, error) {
	return s.tail(ctx, "posts since "+since.UTC().Format(time.RFC3339), fmt.Sprintf(postsSinceSQL, "$1"), ceilMicro(since))
}

// ceilMicro rounds since up to the microsecond, the precision commands are
// stored at, so "at or after since" holds exactly as in Go.
func ceilMicro(since time.Time) time.Time {
	t := since.UTC().Truncate(time.Microsecond)
	if t.Before(since) {
		t = t.Add(time.Microsecond)
	}
	return t
}

// ItemChannels implements core.Journal, from commands_items_idx (migration
// 00008): it reads the item commands' index entries, never the journal.
func (s *Store) ItemChannels(ctx context.Context, platform string) ([]core.ChannelKey, error) {
	rows, err := s.pool.Query(ctx, itemChannelsSQL, platform)
	if err != nil {
		return nil, fmt.Errorf("list item channels of %s: %w", platform, err)
	}
	chs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (core.ChannelKey, error) {
		var ch string
		err := r.Scan(&ch)
		return core.ChannelKey(ch), err
	})
	if err != nil {
		return nil, fmt.Errorf("list item channels of %s: %w", platform, err)
	}
	return chs, nil
}
