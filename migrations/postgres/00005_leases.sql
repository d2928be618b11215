-- +goose Up

-- Leases replicas share (core.Leases, ARCHITECTURE.md section 9): the one
-- replica that drives a channel, the one Telegram poller per token. They
-- live next to the journal so an append can check its writer's fence
-- (token) in the same transaction. token grows every time a lease changes
-- holder; holder is '' once released.
CREATE TABLE leases (
    name       text COLLATE "C" PRIMARY KEY,
    holder     text        NOT NULL,
    token      bigint      NOT NULL CHECK (token > 0),
    expires_at timestamptz NOT NULL
);

-- Lapsed: leases held by nobody alive.
CREATE INDEX leases_expiry_idx ON leases (expires_at) WHERE holder <> '';

-- +goose Down
DROP TABLE leases;
