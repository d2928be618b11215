-- +goose Up

-- The id of the key that signed each command (ARCHITECTURE.md section 4,
-- docs/journal.md). It is part of the signed header. Rows written before it
-- existed keep '' and verify against every trusted key.
ALTER TABLE commands ADD COLUMN key_id TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE commands DROP COLUMN key_id;
