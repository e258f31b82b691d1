"""The PostgreSQL schema, by version, numbered as SQLite's (core.storage.sqlite_schema):
the same tables and columns where the engines allow, so a database moves between them
losslessly (``akira-bot storage migrate``). Times are UTC epoch seconds (double
precision) as in SQLite: exact across both, and sorted the same way.

Differences, and why:

- ``seq`` (bigserial) on nodes stands for SQLite's rowid: insertion order, the tie-break
  of equal times.
- Full-text search is a ``tsvector`` column per node, Portuguese and English stems of the
  text with accents removed (``unaccent``, through an IMMUTABLE wrapper so a generated
  column may use it), in a GIN index that leads with the owner (``btree_gin``): a search
  reads that person's postings, as SQLite's owner-word tokens do.
- Vectors are pgvector's ``vector`` (schema 80; float32, as SQLite's bytes), searched
  in PostgreSQL with its inner-product operator (``<#>``: the cosine of unit vectors,
  what SQLite's numpy search computes), per owner through the owner's index: exact, no
  approximate index (docs/storage.md says why). A process serving a person searches the
  matrix it keeps of them instead (core.storage.postgres.graph).
- Owner changes go out by ``NOTIFY`` (core.storage.postgres.changes), not in a table.
"""

from __future__ import annotations

from core.storage.schema import Migration

MIGRATIONS = [
    Migration(
        1,
        "users and memory nodes",
        """
        CREATE EXTENSION IF NOT EXISTS unaccent;
        CREATE EXTENSION IF NOT EXISTS btree_gin;
        CREATE OR REPLACE FUNCTION akira_unaccent(text) RETURNS text
            LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT
            AS $$ SELECT public.unaccent('public.unaccent'::regdictionary, $1) $$;
        CREATE OR REPLACE FUNCTION akira_words(text) RETURNS tsvector
            LANGUAGE sql IMMUTABLE PARALLEL SAFE
            AS $$ SELECT to_tsvector('pg_catalog.portuguese', coalesce(akira_unaccent($1), ''))
                      || to_tsvector('pg_catalog.english', coalesce(akira_unaccent($1), '')) $$;
        CREATE TABLE users (
            key TEXT PRIMARY KEY,
            platform TEXT NOT NULL,
            external_id TEXT NOT NULL,
            display_name TEXT,
            language TEXT,
            created_at DOUBLE PRECISION NOT NULL,
            last_seen_at DOUBLE PRECISION NOT NULL,
            profile TEXT NOT NULL DEFAULT '{}'
        );
        CREATE TABLE nodes (
            seq BIGSERIAL UNIQUE,
            id TEXT PRIMARY KEY,
            owner TEXT NOT NULL REFERENCES users(key) ON DELETE CASCADE,
            type TEXT NOT NULL,
            content TEXT NOT NULL,
            ts DOUBLE PRECISION NOT NULL,
            chat_id TEXT NOT NULL DEFAULT '',
            chat_kind TEXT NOT NULL DEFAULT 'dm',
            scope TEXT NOT NULL DEFAULT 'dm',
            platform_message_id TEXT,
            reply_to TEXT,
            tags TEXT NOT NULL DEFAULT '[]',
            emotion TEXT,
            emotion_score DOUBLE PRECISION,
            source_id TEXT,
            words TSVECTOR GENERATED ALWAYS AS (akira_words(content)) STORED
        );
        CREATE INDEX nodes_owner_ts ON nodes(owner, ts, seq);
        CREATE INDEX nodes_owner_chat_ts ON nodes(owner, chat_id, ts);
        CREATE INDEX nodes_owner_message ON nodes(owner, platform_message_id);
        CREATE INDEX nodes_owner_seq ON nodes(owner, seq);
        CREATE UNIQUE INDEX nodes_owner_source ON nodes(owner, source_id)
            WHERE source_id IS NOT NULL;
        CREATE INDEX nodes_owner_words ON nodes USING gin (owner, words);
        """,
    ),
    Migration(
        2,
        "arrivals: messages received and not yet handled, per person (serving order)",
        # Unlogged: a row lives for one message's handling; after a crash there is
        # nothing to keep (a message whose process died was never acknowledged).
        """
        CREATE UNLOGGED TABLE person_arrivals (
            owner TEXT NOT NULL,
            sent_at DOUBLE PRECISION NOT NULL,
            message_no NUMERIC NOT NULL,
            arrival BIGSERIAL NOT NULL,
            at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
            PRIMARY KEY (owner, sent_at, message_no, arrival)
        );
        """,
    ),
    Migration(
        10,
        "memory graph: embeddings, connections, tag postings",
        """
        CREATE TABLE graph_meta (
            key TEXT PRIMARY KEY,
            value TEXT NOT NULL
        );
        CREATE TABLE graph_embeddings (
            node_id TEXT PRIMARY KEY REFERENCES nodes(id) ON DELETE CASCADE,
            owner TEXT NOT NULL,
            model TEXT NOT NULL,
            dim INTEGER NOT NULL,
            vector BYTEA NOT NULL
        );
        CREATE INDEX graph_embeddings_owner ON graph_embeddings(owner);
        CREATE INDEX graph_embeddings_model ON graph_embeddings(model, dim);
        CREATE TABLE graph_connections (
            owner TEXT NOT NULL,
            from_id TEXT NOT NULL,
            to_id TEXT NOT NULL,
            relation_type TEXT NOT NULL,
            strength DOUBLE PRECISION NOT NULL,
            explanation TEXT NOT NULL DEFAULT '',
            PRIMARY KEY (owner, from_id, to_id, relation_type)
        );
        CREATE INDEX graph_connections_to ON graph_connections(owner, to_id);
        CREATE TABLE graph_tags (
            owner TEXT NOT NULL,
            tag TEXT NOT NULL,
            ts DOUBLE PRECISION NOT NULL,
            node_id TEXT NOT NULL REFERENCES nodes(id) ON DELETE CASCADE,
            ntags INTEGER NOT NULL,
            PRIMARY KEY (owner, tag, ts, node_id)
        );
        CREATE INDEX graph_tags_node ON graph_tags(node_id);
        """,
    ),
    Migration(
        15,
        "memory graph: entity postings (people, pets, places a message names)",
        """
        CREATE TABLE graph_entities (
            owner TEXT NOT NULL,
            entity TEXT NOT NULL,
            ts DOUBLE PRECISION NOT NULL,
            node_id TEXT NOT NULL REFERENCES nodes(id) ON DELETE CASCADE,
            scope TEXT NOT NULL,
            PRIMARY KEY (owner, entity, ts, node_id)
        );
        CREATE INDEX graph_entities_node ON graph_entities(node_id);
        """,
    ),
    Migration(
        30,
        "structured memories with history and full-text search",
        """
        CREATE TABLE structured_memories (
            seq BIGSERIAL UNIQUE,
            id TEXT NOT NULL UNIQUE,
            owner TEXT NOT NULL,
            category TEXT NOT NULL,
            key TEXT NOT NULL,
            content TEXT NOT NULL,
            tags TEXT NOT NULL DEFAULT '[]',
            priority TEXT NOT NULL DEFAULT 'normal',
            source TEXT NOT NULL,
            verified BOOLEAN NOT NULL,
            verified_by TEXT,
            verified_at DOUBLE PRECISION,
            confidence DOUBLE PRECISION NOT NULL,
            expires_at DOUBLE PRECISION,
            scope TEXT NOT NULL DEFAULT 'dm',
            created_at DOUBLE PRECISION NOT NULL,
            updated_at DOUBLE PRECISION NOT NULL,
            version INTEGER NOT NULL DEFAULT 1,
            words TSVECTOR GENERATED ALWAYS AS (to_tsvector('pg_catalog.simple',
                akira_unaccent(key || ' ' || content || ' ' || tags))) STORED,
            PRIMARY KEY (owner, category, key)
        );
        CREATE INDEX structured_memories_owner_updated ON structured_memories(owner, updated_at);
        CREATE INDEX structured_memories_owner_expires ON structured_memories(owner, expires_at);
        CREATE INDEX structured_memories_owner_words ON structured_memories USING gin (owner, words);
        CREATE TABLE structured_memory_history (
            memory_id TEXT NOT NULL,
            owner TEXT NOT NULL,
            version INTEGER NOT NULL,
            category TEXT NOT NULL,
            key TEXT NOT NULL,
            content TEXT NOT NULL,
            tags TEXT NOT NULL,
            priority TEXT NOT NULL,
            source TEXT NOT NULL,
            verified BOOLEAN NOT NULL,
            verified_by TEXT,
            confidence DOUBLE PRECISION NOT NULL,
            expires_at DOUBLE PRECISION,
            scope TEXT NOT NULL,
            valid_from DOUBLE PRECISION NOT NULL,
            replaced_at DOUBLE PRECISION NOT NULL,
            change TEXT NOT NULL,
            PRIMARY KEY (memory_id, version)
        );
        CREATE INDEX structured_memory_history_owner ON structured_memory_history(owner);
        """,
    ),
    Migration(
        40,
        "learned profile counters (topics, style, languages)",
        """
        CREATE TABLE profile_counters (
            owner TEXT NOT NULL,
            kind TEXT NOT NULL,
            name TEXT NOT NULL,
            weight DOUBLE PRECISION NOT NULL,
            total DOUBLE PRECISION NOT NULL,
            first_at DOUBLE PRECISION NOT NULL,
            last_at DOUBLE PRECISION NOT NULL,
            PRIMARY KEY (owner, kind, name)
        );
        """,
    ),
    Migration(
        60,
        "arrivals name the server process of the bot process that registered them",
        # A bot process killed with kill -9 leaves its registered arrivals behind; the
        # others ignore those whose registering connection is gone, at once.
        "ALTER TABLE person_arrivals ADD COLUMN IF NOT EXISTS pid INTEGER;",
    ),
    Migration(
        61,
        "a person's node version: what a process keeps of their latest nodes is current",
        # Counts the writes to a person's nodes (in the same statement as each write): a
        # process holding the person's lock keeps their latest nodes and vectors while
        # the version it knows is the stored one. A VOLATILE function reads it with a
        # snapshot of its own, taken after the lock in the same statement was granted.
        """
        ALTER TABLE users ADD COLUMN IF NOT EXISTS node_version BIGINT NOT NULL DEFAULT 0;
        CREATE OR REPLACE FUNCTION akira_node_version(text) RETURNS bigint
            LANGUAGE sql VOLATILE AS 'SELECT node_version FROM users WHERE key = $1';
        """,
    ),
    # (62 was a reverted lock function's, session 5 of issue 23: not reused.)
    Migration(
        63,
        "a person's counters version: the learned profile's counters kept by the process",
        # Moved by one by every statement that adds to a person's counters, in that
        # statement: the process serving the person keeps their counters while it holds
        # the version the lock's statement returns, which brings the counters along when
        # it differs. The function reads them with a snapshot of its own (VOLATILE), taken
        # after the lock's UPDATE of the user row waited for the previous holder's commit;
        # NULL when the person has more than $2 (then they are read as before); every
        # float8 as the shortest text that reads back as the same value.
        """
        ALTER TABLE users ADD COLUMN IF NOT EXISTS counters_version BIGINT NOT NULL DEFAULT 0;
        CREATE OR REPLACE FUNCTION akira_counters(text, integer) RETURNS text
            LANGUAGE sql VOLATILE SET extra_float_digits = 3 AS $$
            SELECT CASE WHEN count(*) <= $2 THEN coalesce(json_agg(json_build_array(kind,
                name, weight, total, first_at, last_at)), '[]')::text END
            FROM (SELECT * FROM profile_counters WHERE owner = $1 LIMIT $2 + 1) AS c $$;
        """,
    ),
]


# The extensions the schema creates (unaccent and btree_gin ship with the server, pgvector
# apart); checked before migrating, so a server without one is one clear line at start
# (core.storage.postgres.database).
REQUIRED_EXTENSIONS = ("unaccent", "btree_gin", "vector")

VECTOR_MIGRATIONS = [
    Migration(
        80,
        "vectors in pgvector: graph_embeddings.vector becomes a vector column",
        # Rows stored before are float32 little-endian bytes (SQLite's layout): decoded
        # here in SQL, each IEEE 754 single exactly (sign, exponent, mantissa; a power of
        # two times an integer below 2^24 is exact in double precision and in real).
        """
        CREATE EXTENSION IF NOT EXISTS vector;
        CREATE OR REPLACE FUNCTION akira_float4_le(b bytea) RETURNS real[]
            LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT AS $$
            SELECT array_agg(CASE
                WHEN e = 255 THEN 'NaN'::real
                WHEN e = 0 THEN (s * (m * 2::float8 ^ -149))::real
                ELSE (s * ((m + 8388608) * 2::float8 ^ (e - 150)))::real END ORDER BY i)
            FROM (SELECT i, (bits >> 23) & 255 AS e, bits & 8388607 AS m,
                         CASE WHEN bits >> 31 = 1 THEN -1::float8 ELSE 1::float8 END AS s
                  -- (| and << share one precedence in PostgreSQL: parentheses.)
                  FROM (SELECT i, get_byte(b, 4 * i)::bigint
                                  | (get_byte(b, 4 * i + 1)::bigint << 8)
                                  | (get_byte(b, 4 * i + 2)::bigint << 16)
                                  | (get_byte(b, 4 * i + 3)::bigint << 24) AS bits
                        FROM generate_series(0, length(b) / 4 - 1) AS i) AS w) AS f
        $$;
        ALTER TABLE graph_embeddings
            ALTER COLUMN vector TYPE vector USING akira_float4_le(vector)::vector;
        """,
    ),
    Migration(
        81,
        "memory graph: a second vector per node (another encoder, e.g. USE beside e5)",
        # SQLite's migration 16 (core.storage.sqlite_schema): a second encoder's vector
        # of a node, keyed by model, deleted with the node and with the owner. After 80:
        # the column is pgvector's.
        """
        CREATE TABLE graph_second_embeddings (
            node_id TEXT NOT NULL REFERENCES nodes(id) ON DELETE CASCADE,
            owner TEXT NOT NULL,
            model TEXT NOT NULL,
            dim INTEGER NOT NULL,
            vector vector NOT NULL,
            PRIMARY KEY (node_id, model)
        );
        CREATE INDEX graph_second_embeddings_owner ON graph_second_embeddings(owner, model);
        """,
    ),
    Migration(
        82,
        "what is stored beside a node goes with it by a trigger, not by foreign keys",
        # The vector, postings and second vectors are only ever inserted from the node
        # the same statement inserts (or joined to it), so their foreign keys could not
        # fail, yet each node write paid their checks. What the keys' ON DELETE CASCADE
        # did, a node deleted taking them along (a forget-me that meets a message's node
        # landing after the graph's rows were deleted), a trigger on the nodes' deletes
        # does now, edges both ways included (as SQLite's trigger): deleting costs as
        # before, inserting no longer checks. After 81: graph_second_embeddings exists.
        """
        ALTER TABLE graph_embeddings DROP CONSTRAINT IF EXISTS graph_embeddings_node_id_fkey;
        ALTER TABLE graph_tags DROP CONSTRAINT IF EXISTS graph_tags_node_id_fkey;
        ALTER TABLE graph_entities DROP CONSTRAINT IF EXISTS graph_entities_node_id_fkey;
        ALTER TABLE graph_second_embeddings
            DROP CONSTRAINT IF EXISTS graph_second_embeddings_node_id_fkey;
        CREATE OR REPLACE FUNCTION akira_nodes_deleted() RETURNS trigger
            LANGUAGE plpgsql AS $$
        BEGIN
            DELETE FROM graph_embeddings e USING gone WHERE e.node_id = gone.id;
            DELETE FROM graph_second_embeddings e USING gone WHERE e.node_id = gone.id;
            DELETE FROM graph_tags t USING gone WHERE t.node_id = gone.id;
            DELETE FROM graph_entities t USING gone WHERE t.node_id = gone.id;
            DELETE FROM graph_connections c USING gone
                WHERE c.owner = gone.owner AND c.from_id = gone.id;
            DELETE FROM graph_connections c USING gone
                WHERE c.owner = gone.owner AND c.to_id = gone.id;
            RETURN NULL;
        END $$;
        DROP TRIGGER IF EXISTS nodes_deleted ON nodes;
        CREATE TRIGGER nodes_deleted AFTER DELETE ON nodes
            REFERENCING OLD TABLE AS gone FOR EACH STATEMENT
            EXECUTE FUNCTION akira_nodes_deleted();
        """,
    ),
]


FEEDBACK_MIGRATIONS = [
    Migration(
        70,
        "feedback: reply messages, ratings of replies, mood corrections",
        """
        CREATE TABLE feedback_replies (
            owner TEXT NOT NULL,
            chat_id TEXT NOT NULL,
            message_id TEXT NOT NULL,
            node_id TEXT NOT NULL,
            at DOUBLE PRECISION NOT NULL,
            seq BIGSERIAL,
            PRIMARY KEY (owner, chat_id, message_id)
        );
        CREATE TABLE feedback_ratings (
            owner TEXT NOT NULL,
            node_id TEXT NOT NULL,
            rating TEXT NOT NULL,
            chat_id TEXT NOT NULL,
            message_id TEXT NOT NULL,
            emoji TEXT NOT NULL,
            at DOUBLE PRECISION NOT NULL,
            seq BIGSERIAL,
            PRIMARY KEY (owner, node_id, rating)
        );
        CREATE TABLE mood_corrections (
            id TEXT PRIMARY KEY,
            owner TEXT NOT NULL,
            node_id TEXT,
            text TEXT NOT NULL,
            predicted TEXT NOT NULL,
            predicted_score DOUBLE PRECISION,
            corrected TEXT NOT NULL,
            at DOUBLE PRECISION NOT NULL,
            seq BIGSERIAL
        );
        CREATE INDEX mood_corrections_owner_at ON mood_corrections(owner, at);
        """,
    ),
]
