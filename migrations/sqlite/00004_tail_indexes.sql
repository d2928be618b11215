-- +goose Up

-- Start-up reads only the journal's tail (docs/architecture.md, "Start-up
-- and eviction"): Journal.Unfinished, Policies and PostsSince look commands
-- up by kind, then by run or time. SQLite proves a partial index usable
-- only from terms it can match literally, so these are plain indexes.
CREATE INDEX commands_kind_run_idx ON commands (kind, run, channel, seq);
CREATE INDEX commands_kind_at_idx ON commands (kind, at);

-- +goose Down
DROP INDEX commands_kind_at_idx;
DROP INDEX commands_kind_run_idx;
