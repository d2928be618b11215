-- +goose Up

-- A person's own messages (core.AuthorIndex, MessagesBy): what `forget me`
-- erases first, found without reading every channel. Partial, so it holds
-- one row per message from a person and costs other appends nothing; NOT
-- redacted as the read asks (an erased message is not found again).
CREATE INDEX commands_author_idx ON commands (actor_platform, actor_id, channel, seq)
    WHERE kind = 'message.received' AND actor_type = 'human' AND NOT redacted;

-- +goose Down
DROP INDEX commands_author_idx;
