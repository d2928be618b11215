-- +goose Up

-- The journal: one row per signed Command (ARCHITECTURE.md section 4).
-- payload is the exact bytes that hash to payload_hash. at is Unix
-- microseconds (UTC), the precision that is signed.
CREATE TABLE commands (
    channel        TEXT    NOT NULL, -- platform/workspace/channel
    seq            INTEGER NOT NULL CHECK (seq > 0),
    id             TEXT    NOT NULL,
    kind           TEXT    NOT NULL,
    v              INTEGER NOT NULL,
    actor_type     TEXT    NOT NULL,
    actor_id       TEXT    NOT NULL,
    actor_platform TEXT    NOT NULL,
    platform       TEXT    NOT NULL,
    workspace      TEXT    NOT NULL,
    channel_id     TEXT    NOT NULL,
    thread         TEXT    NOT NULL,
    run            TEXT    NOT NULL,
    cause          TEXT    NOT NULL,
    at             INTEGER NOT NULL,
    payload        BLOB,             -- NULL once redacted
    redacted       INTEGER NOT NULL DEFAULT 0 CHECK (redacted IN (0, 1)),
    payload_hash   BLOB    NOT NULL,
    prev           BLOB    NOT NULL,
    sig            BLOB    NOT NULL,
    PRIMARY KEY (channel, seq),
    CONSTRAINT commands_id_key UNIQUE (id),
    CONSTRAINT commands_redacted_payload CHECK (redacted = (payload IS NULL))
) STRICT;

-- ReadRun; most commands (messages from people) have no run.
CREATE INDEX commands_run_idx ON commands (run, channel, seq) WHERE run <> '';

-- The last seq and chain hash of each channel, written in the transaction
-- that appends; verification compares the chain's end with it.
CREATE TABLE channel_heads (
    channel TEXT    NOT NULL PRIMARY KEY,
    seq     INTEGER NOT NULL CHECK (seq >= 0),
    hash    BLOB    NOT NULL
) STRICT;

-- +goose Down
DROP TABLE channel_heads;
DROP TABLE commands;
