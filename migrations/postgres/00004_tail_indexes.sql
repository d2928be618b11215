-- +goose Up

-- Start-up reads only the journal's tail (docs/architecture.md, "Start-up
-- and eviction"): Journal.Unfinished, Policies and PostsSince. These
-- partial indexes hold only the rare kinds those reads look for (a run's
-- lifecycle, approvals, policy changes, the bot's posts), so they stay
-- small and cost appends of other kinds nothing. NOT redacted matches what
-- the queries ask (the folds skip redacted commands); a redaction takes
-- the row out of the index.
CREATE INDEX commands_lifecycle_idx ON commands (kind, run, channel, seq)
    WHERE kind IN ('run.started', 'run.completed', 'run.failed',
                   'approval.requested', 'approval.resolved', 'policy.changed')
      AND NOT redacted;

-- The bot's posts by time: intent windows are rebuilt from the last ones.
CREATE INDEX commands_posted_at_idx ON commands (at)
    WHERE kind = 'message.posted' AND NOT redacted;

-- +goose Down
DROP INDEX commands_posted_at_idx;
DROP INDEX commands_lifecycle_idx;
