-- +goose Up

-- A channel's latest fold checkpoint (see the PostgreSQL migration of the
-- same number). Partial on the kind alone: the query names it literally, so
-- SQLite can use it; redacted rows are filtered from the few it holds.
CREATE INDEX commands_checkpoint_idx ON commands (channel, seq)
    WHERE kind = 'fold.checkpoint';

-- +goose Down
DROP INDEX commands_checkpoint_idx;
