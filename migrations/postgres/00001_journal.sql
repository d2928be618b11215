-- +goose Up

-- The journal: one row per signed Command (ARCHITECTURE.md section 4).
-- payload is bytea, never jsonb: jsonb reorders keys and drops whitespace,
-- and the stored bytes must hash to payload_hash. channel uses the "C"
-- collation so (channel, seq) order is byte order in every store.
CREATE TABLE commands (
    channel        text COLLATE "C" NOT NULL, -- platform/workspace/channel
    seq            bigint      NOT NULL CHECK (seq > 0),
    id             text        NOT NULL,
    kind           text        NOT NULL,
    v              integer     NOT NULL,
    actor_type     text        NOT NULL,
    actor_id       text        NOT NULL,
    actor_platform text        NOT NULL,
    platform       text        NOT NULL,
    workspace      text        NOT NULL,
    channel_id     text        NOT NULL,
    thread         text        NOT NULL,
    run            text        NOT NULL,
    cause          text        NOT NULL,
    at             timestamptz NOT NULL, -- microseconds, as signed
    payload        bytea,                -- NULL once redacted
    redacted       boolean     NOT NULL DEFAULT false,
    payload_hash   bytea       NOT NULL,
    prev           bytea       NOT NULL,
    sig            bytea       NOT NULL,
    PRIMARY KEY (channel, seq),
    CONSTRAINT commands_id_key UNIQUE (id),
    CONSTRAINT commands_redacted_payload CHECK (redacted = (payload IS NULL))
);

-- ReadRun; most commands (messages from people) have no run.
CREATE INDEX commands_run_idx ON commands (run, channel, seq) WHERE run <> '';

-- The last seq and chain hash of each channel, written in the transaction
-- that appends. Appenders lock this row, which serialises them per channel;
-- verification compares the chain's end with it, so a deleted last row shows.
CREATE TABLE channel_heads (
    channel text COLLATE "C" PRIMARY KEY,
    seq     bigint NOT NULL CHECK (seq >= 0),
    hash    bytea  NOT NULL
);

-- +goose Down
DROP TABLE channel_heads;
DROP TABLE commands;
