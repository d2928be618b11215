-- +goose Up

-- `export my data` archives, built once and served from here until their
-- link expires (docs/privacy.md); the engine deletes a row when it expires
-- and every row of a person on `forget me`.
CREATE TABLE exports (
    id         text PRIMARY KEY,
    platform   text NOT NULL,
    person     text NOT NULL,
    data       bytea NOT NULL,
    expires_at timestamptz NOT NULL
);
CREATE INDEX exports_person_idx ON exports (platform, person);
CREATE INDEX exports_expiry_idx ON exports (expires_at);

-- +goose Down
DROP TABLE exports;
