-- +goose Up

-- Inbound deliveries a surface could not hand to the engine and the
-- platform will not redeliver (core.DeliveryQueue): retried with backoff
-- until deadline, then deleted. inbound is the core.Inbound as JSON (the
-- message text too), deleted with the row once delivered or given up.
-- next_at is also the claim: a claim moves it a lease ahead.
CREATE TABLE delivery_queue (
    platform   text COLLATE "C" NOT NULL,
    key        text COLLATE "C" NOT NULL,
    inbound    jsonb       NOT NULL,
    queued_at  timestamptz NOT NULL,
    deadline   timestamptz NOT NULL,
    next_at    timestamptz NOT NULL,
    attempts   integer     NOT NULL DEFAULT 0,
    last_error text        NOT NULL DEFAULT '',
    PRIMARY KEY (platform, key)
);

CREATE INDEX delivery_queue_due_idx ON delivery_queue (platform, next_at);

-- +goose Down
DROP TABLE delivery_queue;
