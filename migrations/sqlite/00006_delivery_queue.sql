-- +goose Up

-- Inbound deliveries waiting for a retry (core.DeliveryQueue): see the
-- PostgreSQL migration. Times are Unix milliseconds; inbound is JSON.
CREATE TABLE delivery_queue (
    platform   TEXT    NOT NULL,
    key        TEXT    NOT NULL,
    inbound    TEXT    NOT NULL,
    queued_at  INTEGER NOT NULL,
    deadline   INTEGER NOT NULL,
    next_at    INTEGER NOT NULL,
    attempts   INTEGER NOT NULL DEFAULT 0,
    last_error TEXT    NOT NULL DEFAULT '',
    PRIMARY KEY (platform, key)
) STRICT;

CREATE INDEX delivery_queue_due_idx ON delivery_queue (platform, next_at);

-- +goose Down
DROP TABLE delivery_queue;
