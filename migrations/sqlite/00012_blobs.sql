-- +goose Up

-- The embedded store keeps blobs (attachment images) as files in the data
-- directory (blobs/, attachments.DirBlobs), not in this database; this
-- migration keeps the two dialects' numbering in step.
SELECT 1;

-- +goose Down
SELECT 1;
