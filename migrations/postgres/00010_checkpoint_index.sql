-- +goose Up

-- A channel's latest fold checkpoint (Journal LatestOfKind, engine
-- chanView.load): partial, so it holds one row per checkpoint and costs
-- appends of other kinds nothing. NOT redacted as the read asks: an erased
-- checkpoint is not restored from.
CREATE INDEX commands_checkpoint_idx ON commands (channel, seq)
    WHERE kind = 'fold.checkpoint' AND NOT redacted;

-- +goose Down
DROP INDEX commands_checkpoint_idx;
