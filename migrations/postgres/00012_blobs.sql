-- +goose Up

-- Content-addressed blobs: the images a model was shown (attachments), so
-- a resumed run shows them again without downloading. The journal holds
-- only the sha256; erasure and retention delete rows by it.
CREATE TABLE blobs (
    sha256     text PRIMARY KEY CHECK (sha256 ~ '^[0-9a-f]{64}$'),
    data       bytea NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE blobs;
