-- +goose Up

-- Journal.ItemChannels (see the PostgreSQL migration of the same number).
-- SQLite proves a partial index usable only from terms it can match
-- literally, so this is a plain index led by kind.
CREATE INDEX commands_kind_platform_idx ON commands (kind, platform, channel);

-- +goose Down
DROP INDEX commands_kind_platform_idx;
