-- +goose Up

-- Per-person sign-in: see the PostgreSQL migration. Times are Unix
-- milliseconds, 0 for none.
CREATE TABLE grants (
    platform     TEXT    NOT NULL,
    person       TEXT    NOT NULL,
    server       TEXT    NOT NULL,
    connected_at INTEGER NOT NULL,
    refreshed_at INTEGER NOT NULL DEFAULT 0,
    expires_at   INTEGER NOT NULL DEFAULT 0,
    key_id       TEXT    NOT NULL,
    sealed       BLOB    NOT NULL,
    PRIMARY KEY (platform, person, server)
) STRICT;

CREATE TABLE signins (
    link_id      TEXT    PRIMARY KEY,
    state_hash   TEXT    NOT NULL UNIQUE,
    platform     TEXT    NOT NULL,
    person       TEXT    NOT NULL,
    server       TEXT    NOT NULL,
    browser_hash TEXT    NOT NULL,
    key_id       TEXT    NOT NULL,
    sealed       BLOB    NOT NULL,
    expires_at   INTEGER NOT NULL,
    completed    INTEGER NOT NULL DEFAULT 0
) STRICT;
CREATE INDEX signins_expiry_idx ON signins (expires_at);

-- +goose Down
DROP TABLE signins;
DROP TABLE grants;
