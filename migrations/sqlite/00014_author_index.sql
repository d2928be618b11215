-- +goose Up

-- A person's own messages (core.AuthorIndex, MessagesBy): what `forget me`
-- erases first, found without reading every channel. Partial on the kind
-- and actor type, named literally in the query so SQLite uses it; it holds
-- one row per message from a person, costs other appends nothing, and an
-- erased message leaves it.
CREATE INDEX commands_author_idx ON commands (actor_platform, actor_id, channel, seq)
    WHERE kind = 'message.received' AND actor_type = 'human' AND redacted = 0;

-- +goose Down
DROP INDEX commands_author_idx;
