-- +goose Up

-- Start-up reads only the journal's tail (docs/architecture.md, "Start-up
-- and eviction"): Journal.Unfinished, Policies and PostsSince.

-- These partial indexes hold only the rare kinds those reads look for (a
-- run's lifecycle, approvals, policy changes, the bot's posts), so they stay
-- small and cost appends of other kinds nothing. NOT redacted matches what
-- the queries ask (the folds skip redacted commands); a redaction takes the
-- row out of the index.
CREATE INDEX commands_lifecycle_idx ON commands (kind, run, channel, seq)
    WHERE kind IN ('run.started', 'run.completed', 'run.failed',
                   'approval.requested', 'approval.resolved', 'policy.changed')
      AND NOT redacted;

-- The bot's posts by time: intent windows are rebuilt from the last ones.
CREATE INDEX commands_posted_at_idx ON commands (at)
    WHERE kind = 'message.posted' AND NOT redacted;

-- The run.started of every run that has not ended, kept by triggers from
-- the journal's own rows (a derived index: it can be rebuilt with the
-- INSERT below). Finding the open runs among all runs would otherwise read
-- every run's lifecycle at each start. A run's row is recomputed whenever
-- one of its lifecycle commands is appended or redacted, with the folds'
-- rule: a redacted run.completed does not end a run.
CREATE TABLE open_runs (
    channel text COLLATE "C" NOT NULL,
    run     text   NOT NULL,
    seq     bigint NOT NULL, -- of the run.started
    PRIMARY KEY (channel, run, seq)
);

INSERT INTO open_runs (channel, run, seq)
SELECT s.channel, s.run, s.seq FROM commands s
 WHERE s.kind = 'run.started' AND NOT s.redacted AND s.run <> ''
   AND NOT EXISTS (SELECT 1 FROM commands t
        WHERE t.kind IN ('run.completed', 'run.failed') AND NOT t.redacted
          AND t.run = s.run AND t.channel = s.channel);

-- +goose StatementBegin
CREATE FUNCTION open_runs_sync() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM open_runs WHERE channel = NEW.channel AND run = NEW.run;
    INSERT INTO open_runs (channel, run, seq)
    SELECT s.channel, s.run, s.seq FROM commands s
     WHERE s.kind = 'run.started' AND NOT s.redacted AND s.run = NEW.run AND s.channel = NEW.channel
       AND NOT EXISTS (SELECT 1 FROM commands t
            WHERE t.kind IN ('run.completed', 'run.failed') AND NOT t.redacted
              AND t.run = NEW.run AND t.channel = NEW.channel);
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER commands_open_runs AFTER INSERT ON commands FOR EACH ROW
    WHEN (NEW.kind IN ('run.started', 'run.completed', 'run.failed') AND NEW.run <> '')
    EXECUTE FUNCTION open_runs_sync();
CREATE TRIGGER commands_open_runs_redact AFTER UPDATE OF redacted ON commands FOR EACH ROW
    WHEN (NEW.kind IN ('run.started', 'run.completed', 'run.failed') AND NEW.run <> ''
          AND NEW.redacted IS DISTINCT FROM OLD.redacted)
    EXECUTE FUNCTION open_runs_sync();

-- +goose Down
DROP TRIGGER commands_open_runs_redact ON commands;
DROP TRIGGER commands_open_runs ON commands;
DROP FUNCTION open_runs_sync();
DROP TABLE open_runs;
DROP INDEX commands_posted_at_idx;
DROP INDEX commands_lifecycle_idx;
