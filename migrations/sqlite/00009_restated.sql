-- +goose Up

-- Restatements (core.Restater): the payload that stands in place of a
-- decision record whose free text an erasure destroyed (docs/privacy.md).
-- The commands row is redacted as any other (payload NULL); the signed
-- command.redacted naming it names the restatement's sha256.
CREATE TABLE restated (
    channel TEXT    NOT NULL,
    seq     INTEGER NOT NULL,
    payload BLOB    NOT NULL,
    PRIMARY KEY (channel, seq)
) STRICT;

-- +goose Down
DROP TABLE restated;
