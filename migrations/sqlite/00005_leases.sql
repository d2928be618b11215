-- +goose Up

-- Leases (core.Leases): see the PostgreSQL migration. A single process
-- holds every lease of an embedded store; the table keeps the journal's
-- fencing the same in both stores. expires_at is Unix milliseconds.
CREATE TABLE leases (
    name       TEXT PRIMARY KEY,
    holder     TEXT    NOT NULL,
    token      INTEGER NOT NULL CHECK (token > 0),
    expires_at INTEGER NOT NULL
) STRICT;

-- +goose Down
DROP TABLE leases;
