-- +goose Up

-- Start-up reads only the journal's tail (docs/architecture.md, "Start-up
-- and eviction"): Journal.Unfinished, Policies and PostsSince look commands
-- up by kind, then by run or time. SQLite proves a partial index usable
-- only from terms it can match literally, so these are plain indexes.
CREATE INDEX commands_kind_run_idx ON commands (kind, run, channel, seq);
CREATE INDEX commands_kind_at_idx ON commands (kind, at);

-- The run.started of every run that has not ended, kept by triggers from
-- the journal's own rows (see the PostgreSQL migration of the same number).
CREATE TABLE open_runs (
    channel TEXT    NOT NULL,
    run     TEXT    NOT NULL,
    seq     INTEGER NOT NULL, -- of the run.started
    PRIMARY KEY (channel, run, seq)
) STRICT;

INSERT INTO open_runs (channel, run, seq)
SELECT s.channel, s.run, s.seq FROM commands s
 WHERE s.kind = 'run.started' AND NOT s.redacted AND s.run <> ''
   AND NOT EXISTS (SELECT 1 FROM commands t
        WHERE t.kind IN ('run.completed', 'run.failed') AND NOT t.redacted
          AND t.run = s.run AND t.channel = s.channel);

-- +goose StatementBegin
CREATE TRIGGER commands_open_runs AFTER INSERT ON commands
    WHEN NEW.kind IN ('run.started', 'run.completed', 'run.failed') AND NEW.run <> ''
BEGIN
    DELETE FROM open_runs WHERE channel = NEW.channel AND run = NEW.run;
    INSERT INTO open_runs (channel, run, seq)
    SELECT s.channel, s.run, s.seq FROM commands s
     WHERE s.kind = 'run.started' AND NOT s.redacted AND s.run = NEW.run AND s.channel = NEW.channel
       AND NOT EXISTS (SELECT 1 FROM commands t
            WHERE t.kind IN ('run.completed', 'run.failed') AND NOT t.redacted
              AND t.run = NEW.run AND t.channel = NEW.channel);
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER commands_open_runs_redact AFTER UPDATE OF redacted ON commands
    WHEN NEW.kind IN ('run.started', 'run.completed', 'run.failed') AND NEW.run <> ''
         AND NEW.redacted IS NOT OLD.redacted
BEGIN
    DELETE FROM open_runs WHERE channel = NEW.channel AND run = NEW.run;
    INSERT INTO open_runs (channel, run, seq)
    SELECT s.channel, s.run, s.seq FROM commands s
     WHERE s.kind = 'run.started' AND NOT s.redacted AND s.run = NEW.run AND s.channel = NEW.channel
       AND NOT EXISTS (SELECT 1 FROM commands t
            WHERE t.kind IN ('run.completed', 'run.failed') AND NOT t.redacted
              AND t.run = NEW.run AND t.channel = NEW.channel);
END;
-- +goose StatementEnd

-- +goose Down
DROP TRIGGER commands_open_runs_redact;
DROP TRIGGER commands_open_runs;
DROP TABLE open_runs;
DROP INDEX commands_kind_at_idx;
DROP INDEX commands_kind_run_idx;
