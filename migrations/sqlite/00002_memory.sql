-- +goose Up

-- Per-channel memory (ARCHITECTURE.md section 7): a derived index of the
-- journal's memory.* commands, rebuilt with `bot memory rebuild`.
--
-- SQLite has no row-level security: the ringfence is the code-level
-- channel condition every query of store/sqlite carries (and the memory
-- service's channel-bound handles). The Postgres store adds RLS below that.

-- One row per memory, in every state (see the Postgres migration). n is an
-- explicit rowid so VACUUM cannot renumber the rows memory_fts points at.
CREATE TABLE memories (
    n             INTEGER PRIMARY KEY,
    id            TEXT    NOT NULL UNIQUE,
    channel       TEXT    NOT NULL,
    seq           INTEGER NOT NULL CHECK (seq > 0),
    text          TEXT    NOT NULL,
    origin        TEXT    NOT NULL,
    actor         TEXT    NOT NULL, -- JSON core.Actor
    trust         TEXT    NOT NULL,
    derivation    TEXT    NOT NULL,
    created_at    INTEGER NOT NULL, -- Unix microseconds
    forgotten     INTEGER NOT NULL DEFAULT 0 CHECK (forgotten IN (0, 1)),
    forgotten_at  INTEGER,
    forget_reason TEXT    NOT NULL DEFAULT '',
    deleted       INTEGER NOT NULL DEFAULT 0 CHECK (deleted IN (0, 1)),
    deleted_at    INTEGER,
    CHECK (deleted = 0 OR (forgotten = 1 AND text = ''))
) STRICT;

CREATE UNIQUE INDEX memories_origin_key ON memories (channel, origin) WHERE origin <> '';
CREATE INDEX memories_channel_idx ON memories (channel, id);

-- Vectors of live memories, one per embedding model: little-endian
-- float32, dims of them. Search is brute force over the channel's rows.
CREATE TABLE memory_vectors (
    memory_id TEXT    NOT NULL REFERENCES memories (id) ON DELETE CASCADE,
    channel   TEXT    NOT NULL,
    model     TEXT    NOT NULL,
    dims      INTEGER NOT NULL CHECK (dims > 0),
    embedding BLOB    NOT NULL CHECK (length(embedding) = 4 * dims),
    PRIMARY KEY (memory_id, model)
) STRICT;
CREATE INDEX memory_vectors_channel_idx ON memory_vectors (channel, model, dims);

CREATE TABLE memory_links (
    channel TEXT NOT NULL,
    linked  TEXT NOT NULL,
    PRIMARY KEY (channel, linked),
    CHECK (channel <> linked)
) STRICT;

-- Full text of live memories only (rowid = memories.n). secure-delete
-- removes a deleted memory's terms from the index at once instead of
-- leaving them in old segments until a merge.
CREATE VIRTUAL TABLE memory_fts USING fts5(text, tokenize = 'porter unicode61');
INSERT INTO memory_fts (memory_fts, rank) VALUES ('secure-delete', 1);

-- +goose Down
DROP TABLE memory_fts;
DROP TABLE memory_links;
DROP TABLE memory_vectors;
DROP TABLE memories;
