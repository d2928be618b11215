-- +goose Up

-- Journal.ItemChannels: the channels where a person's inbox, App Home or
-- `consents` can find anything. A partial index of the item kinds only, so
-- it stays the size of the approvals, grants and reports ever made and
-- costs appends of other kinds nothing.
CREATE INDEX commands_items_idx ON commands (platform, channel)
    WHERE kind IN ('approval.requested', 'consent.granted', 'report.filed') AND NOT redacted;

-- +goose Down
DROP INDEX commands_items_idx;
