-- +goose Up

-- `export my data` archives: see the PostgreSQL migration. expires_at is
-- Unix milliseconds.
CREATE TABLE exports (
    id         TEXT    PRIMARY KEY,
    platform   TEXT    NOT NULL,
    person     TEXT    NOT NULL,
    data       BLOB    NOT NULL,
    expires_at INTEGER NOT NULL
) STRICT;
CREATE INDEX exports_person_idx ON exports (platform, person);
CREATE INDEX exports_expiry_idx ON exports (expires_at);

-- +goose Down
DROP TABLE exports;
