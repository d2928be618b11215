-- +goose Up

-- Per-channel memory (ARCHITECTURE.md section 7): a derived index of the
-- journal's memory.* commands, rebuilt with `bot memory rebuild`.
--
-- Ringfence. Every memory query runs in a transaction that does
--   SELECT set_config('role', 'marlowe_memory', true),
--          set_config('marlowe.channel', <channel key>, true)
-- (SET LOCAL ROLE and SET LOCAL marlowe.channel). The row-level security
-- policies below then show the transaction only its channel's rows (plus,
-- for reading, the channels mutually linked with it), whatever the SQL says.
-- The role matters: superusers and roles with BYPASSRLS ignore RLS, and a
-- table's owner does too unless FORCE ROW LEVEL SECURITY is set (it is, for
-- owners that are not superusers). marlowe_memory is NOLOGIN, not a
-- superuser, owns nothing and has only row privileges on these tables, so
-- RLS always applies to it. The application's login role must be a member of
-- marlowe_memory (the migration grants it when it can; otherwise a DBA runs
-- `GRANT marlowe_memory TO <app role>`).

-- pgvector first, with an error that says what to do.
-- +goose StatementBegin
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'vector') THEN
        RAISE EXCEPTION 'marlowe memory needs the pgvector extension, which is not installed on this PostgreSQL server'
            USING HINT = 'Install pgvector (the pgvector/pgvector Docker image, the postgresql-<major>-pgvector package, or scripts/install-pgvector), then restart the bot.';
    END IF;
END
$$;
-- +goose StatementEnd

CREATE EXTENSION IF NOT EXISTS vector;

-- The restricted role memory queries run as. Roles are cluster-wide, so
-- another database's migration may be creating it at this very moment.
-- +goose StatementBegin
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'marlowe_memory') THEN
        BEGIN
            CREATE ROLE marlowe_memory NOLOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE;
        EXCEPTION
            WHEN duplicate_object OR unique_violation THEN NULL; -- created concurrently
            WHEN insufficient_privilege THEN
                RAISE EXCEPTION 'marlowe memory needs the role marlowe_memory, and % may not create roles', current_user
                    USING HINT = 'As a superuser run: CREATE ROLE marlowe_memory NOLOGIN; GRANT marlowe_memory TO ' || quote_ident(current_user) || ';';
        END;
    END IF;
    IF NOT pg_has_role(current_user, 'marlowe_memory', 'MEMBER') THEN
        BEGIN
            EXECUTE format('GRANT marlowe_memory TO %I', current_user);
        EXCEPTION WHEN insufficient_privilege THEN
            RAISE EXCEPTION '% is not a member of marlowe_memory and may not grant it', current_user
                USING HINT = 'As a superuser run: GRANT marlowe_memory TO ' || quote_ident(current_user) || ';';
        END;
    END IF;
END
$$;
-- +goose StatementEnd

-- One row per memory, in every state. A forgotten memory keeps its text
-- (admins can list it) but leaves search; a deleted one is a tombstone whose
-- text and provenance are destroyed. seq is the journal seq of the
-- memory.written command (Delete redacts it).
CREATE TABLE memories (
    id            text COLLATE "C" PRIMARY KEY,
    channel       text COLLATE "C" NOT NULL,
    seq           bigint      NOT NULL CHECK (seq > 0),
    text          text        NOT NULL,
    origin        text        NOT NULL,
    actor         jsonb       NOT NULL,
    trust         text        NOT NULL,
    derivation    text        NOT NULL,
    created_at    timestamptz NOT NULL,
    forgotten     boolean     NOT NULL DEFAULT false,
    forgotten_at  timestamptz,
    forget_reason text        NOT NULL DEFAULT '',
    deleted       boolean     NOT NULL DEFAULT false,
    deleted_at    timestamptz,
    CONSTRAINT memories_deleted_is_forgotten CHECK (NOT deleted OR (forgotten AND text = ''))
);

-- Idempotent remember: one memory per (channel, origin command).
CREATE UNIQUE INDEX memories_origin_key ON memories (channel, origin) WHERE origin <> '';
CREATE INDEX memories_channel_idx ON memories (channel, id);

-- Full text, as an inverted index of PostgreSQL's own 'english' lexemes
-- (to_tsvector) of live memories, kept by a trigger. Why not a GIN index on
-- a tsvector column: under row-level security the planner may only use an
-- index condition before the policy when its operator is leakproof, and
-- tsvector @@ tsquery (ts_match_vq) is not, so a GIN index is never used
-- and every recall scans the table (63 ms at 200,000 memories). Text
-- equality is leakproof, so (channel, term) lookups use the btree.
CREATE TABLE memory_terms (
    channel   text COLLATE "C" NOT NULL,
    term      text COLLATE "C" NOT NULL,
    memory_id text COLLATE "C" NOT NULL REFERENCES memories (id) ON DELETE CASCADE,
    PRIMARY KEY (channel, term, memory_id)
);
CREATE INDEX memory_terms_memory_idx ON memory_terms (memory_id);

-- The trigger runs as the writer (marlowe_memory, under the policies).
-- +goose StatementBegin
CREATE FUNCTION memory_terms_sync() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' THEN
        DELETE FROM memory_terms WHERE memory_id = OLD.id AND channel = OLD.channel;
    END IF;
    IF NOT NEW.forgotten AND NEW.text <> '' THEN
        INSERT INTO memory_terms (channel, term, memory_id)
        SELECT NEW.channel, t, NEW.id FROM unnest(tsvector_to_array(to_tsvector('english', NEW.text))) AS t
        ON CONFLICT DO NOTHING;
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER memories_terms AFTER INSERT OR UPDATE OF text, forgotten ON memories
    FOR EACH ROW EXECUTE FUNCTION memory_terms_sync();

-- Vectors of live memories, one per embedding model. The column has no
-- dimension so models of any size live side by side; HNSW indexes need one,
-- so the store creates a partial expression index per (model, dims) on first
-- use:
--   CREATE INDEX ... USING hnsw ((embedding::vector(DIMS)) vector_cosine_ops)
--     WHERE model = 'MODEL' AND dims = DIMS
-- and searches big channels with the same cast and predicate; a channel
-- small enough to scan exactly (channel index, no cast) is scanned exactly,
-- which is faster than a global HNSW walk filtered down to one channel.
CREATE TABLE memory_vectors (
    memory_id text COLLATE "C" NOT NULL REFERENCES memories (id) ON DELETE CASCADE,
    channel   text COLLATE "C" NOT NULL,
    model     text    NOT NULL,
    dims      integer NOT NULL CHECK (dims > 0),
    embedding vector  NOT NULL,
    PRIMARY KEY (memory_id, model),
    CONSTRAINT memory_vectors_dims CHECK (vector_dims(embedding) = dims)
);
CREATE INDEX memory_vectors_channel_idx ON memory_vectors (channel, model, dims);

-- The channels each channel's policy links to (its side). A link is
-- effective only while both sides declare it.
CREATE TABLE memory_links (
    channel text COLLATE "C" NOT NULL,
    linked  text COLLATE "C" NOT NULL,
    PRIMARY KEY (channel, linked),
    CHECK (channel <> linked)
);

ALTER TABLE memories ENABLE ROW LEVEL SECURITY;
ALTER TABLE memories FORCE ROW LEVEL SECURITY;
ALTER TABLE memory_vectors ENABLE ROW LEVEL SECURITY;
ALTER TABLE memory_vectors FORCE ROW LEVEL SECURITY;
ALTER TABLE memory_terms ENABLE ROW LEVEL SECURITY;
ALTER TABLE memory_terms FORCE ROW LEVEL SECURITY;
ALTER TABLE memory_links ENABLE ROW LEVEL SECURITY;
ALTER TABLE memory_links FORCE ROW LEVEL SECURITY;

-- Writes: the bound channel only. Reads: the bound channel, and the
-- channels both it and they declare linked. current_setting(..., true) is
-- NULL when unset, which matches nothing.
CREATE POLICY memories_own ON memories FOR ALL
    USING (channel = current_setting('marlowe.channel', true))
    WITH CHECK (channel = current_setting('marlowe.channel', true));
CREATE POLICY memories_linked ON memories FOR SELECT
    USING (channel IN (
        SELECT l.linked FROM memory_links l
        JOIN memory_links r ON r.channel = l.linked AND r.linked = l.channel
        WHERE l.channel = current_setting('marlowe.channel', true)));

CREATE POLICY memory_vectors_own ON memory_vectors FOR ALL
    USING (channel = current_setting('marlowe.channel', true))
    WITH CHECK (channel = current_setting('marlowe.channel', true));
CREATE POLICY memory_vectors_linked ON memory_vectors FOR SELECT
    USING (channel IN (
        SELECT l.linked FROM memory_links l
        JOIN memory_links r ON r.channel = l.linked AND r.linked = l.channel
        WHERE l.channel = current_setting('marlowe.channel', true)));

CREATE POLICY memory_terms_own ON memory_terms FOR ALL
    USING (channel = current_setting('marlowe.channel', true))
    WITH CHECK (channel = current_setting('marlowe.channel', true));
CREATE POLICY memory_terms_linked ON memory_terms FOR SELECT
    USING (channel IN (
        SELECT l.linked FROM memory_links l
        JOIN memory_links r ON r.channel = l.linked AND r.linked = l.channel
        WHERE l.channel = current_setting('marlowe.channel', true)));

-- Links hold channel keys only; every channel may read them (the linked
-- policies above need the other side's row), only the bound channel may
-- change its own.
CREATE POLICY memory_links_read ON memory_links FOR SELECT USING (true);
CREATE POLICY memory_links_own ON memory_links FOR ALL
    USING (channel = current_setting('marlowe.channel', true))
    WITH CHECK (channel = current_setting('marlowe.channel', true));

GRANT SELECT, INSERT, UPDATE, DELETE ON memories, memory_vectors, memory_terms, memory_links TO marlowe_memory;

-- +goose Down
DROP TABLE memory_links;
DROP TABLE memory_terms;
DROP FUNCTION memory_terms_sync();
DROP TABLE memory_vectors;
DROP TABLE memories;
-- The role is cluster-wide and may serve other databases: it stays.
