-- +goose Up

-- Per-person sign-in (core.CredentialStore, docs/connectors.md "Acting as
-- each person"). grants holds one sealed OAuth grant per person and
-- connector server: sealed is AES-GCM ciphertext made by the process with
-- MARLOWE_SECRETS_KEY (key_id names which key), bound to the row's
-- platform, person and server; the database never sees a token.
CREATE TABLE grants (
    platform     text COLLATE "C" NOT NULL,
    person       text COLLATE "C" NOT NULL,
    server       text COLLATE "C" NOT NULL,
    connected_at timestamptz NOT NULL,
    refreshed_at timestamptz,
    expires_at   timestamptz,
    key_id       text  NOT NULL,
    sealed       bytea NOT NULL,
    PRIMARY KEY (platform, person, server)
);

-- A sign-in link once followed: link_id makes the link single-use across
-- restarts and replicas; state_hash (sha256 of the OAuth state) finds it
-- again on the callback, which completes it once (completed).
CREATE TABLE signins (
    link_id      text COLLATE "C" PRIMARY KEY,
    state_hash   text COLLATE "C" NOT NULL UNIQUE,
    platform     text NOT NULL,
    person       text NOT NULL,
    server       text NOT NULL,
    browser_hash text NOT NULL,
    key_id       text NOT NULL,
    sealed       bytea NOT NULL,
    expires_at   timestamptz NOT NULL,
    completed    boolean NOT NULL DEFAULT false
);
CREATE INDEX signins_expiry_idx ON signins (expires_at);

-- +goose Down
DROP TABLE signins;
DROP TABLE grants;
