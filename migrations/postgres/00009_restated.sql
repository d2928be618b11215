-- +goose Up

-- Restatements (core.Restater): the payload that stands in place of a
-- decision record whose free text an erasure destroyed (docs/privacy.md).
-- The commands row is redacted as any other (payload NULL); the signed
-- command.redacted naming it names the restatement's sha256. bytea, as
-- commands.payload: the exact bytes are hashed.
CREATE TABLE restated (
    channel text   NOT NULL COLLATE "C",
    seq     bigint NOT NULL,
    payload bytea  NOT NULL,
    PRIMARY KEY (channel, seq)
);

-- +goose Down
DROP TABLE restated;
