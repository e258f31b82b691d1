"""The SQLite schema: every migration of the shipped SQLite backend, by version (see
:class:`core.storage.schema.Migration`). PostgreSQL has its own, with the same tables
(core.storage.postgres.schema).

- 1-2 users and memory nodes
- 3 owner changes (core.storage.owner_changes)
- 10-16 the memory graph: embeddings, connections, tag postings, full-text words,
  entity postings, second vectors
- 30 structured memories with their history and full-text search
- 40 what is learned about a person: decayed counters (core.profile)
- 70 feedback: the bot's messages per reply, ratings of replies, mood corrections
"""

from __future__ import annotations

from core.storage.owner_words import SQL_FUNCTION as OWNER_WORDS
from core.storage.schema import Migration

NODE_MIGRATIONS = [
    Migration(
        1,
        "users and memory nodes",
        """
        CREATE TABLE users (
            key TEXT PRIMARY KEY,
            platform TEXT NOT NULL,
            external_id TEXT NOT NULL,
            display_name TEXT,
            language TEXT,
            created_at REAL NOT NULL,
            last_seen_at REAL NOT NULL,
            profile TEXT NOT NULL DEFAULT '{}'
        );
        CREATE TABLE nodes (
            id TEXT PRIMARY KEY,
            owner TEXT NOT NULL REFERENCES users(key) ON DELETE CASCADE,
            type TEXT NOT NULL,
            content TEXT NOT NULL,
            ts REAL NOT NULL,
            chat_id TEXT NOT NULL DEFAULT '',
            chat_kind TEXT NOT NULL DEFAULT 'dm',
            scope TEXT NOT NULL DEFAULT 'dm',
            platform_message_id TEXT,
            reply_to TEXT,
            tags TEXT NOT NULL DEFAULT '[]',
            emotion TEXT,
            emotion_score REAL,
            source_id TEXT
        );
        CREATE INDEX nodes_owner_ts ON nodes(owner, ts);
        CREATE INDEX nodes_owner_message ON nodes(owner, platform_message_id);
        CREATE UNIQUE INDEX nodes_owner_source ON nodes(owner, source_id) WHERE source_id IS NOT NULL;
        """,
    ),
    Migration(
        2,
        "nodes by chat",
        # A chat's latest turns without walking the person's other chats: every message
        # reads them (history, follow-ups), so they must stay an index lookup.
        "CREATE INDEX nodes_owner_chat_ts ON nodes(owner, chat_id, ts);",
    ),
]


CHANGE_MIGRATIONS = [
    Migration(
        3,
        "owner changes: other processes drop their caches of changed owners",
        """
        CREATE TABLE owner_changes (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            owner TEXT NOT NULL UNIQUE,
            at REAL NOT NULL
        );
        CREATE INDEX owner_changes_at ON owner_changes(at);
        CREATE TABLE owner_changes_pruned (
            one INTEGER PRIMARY KEY CHECK (one = 1),
            seq INTEGER NOT NULL
        );
        INSERT INTO owner_changes_pruned(one, seq) VALUES (1, 0);
        """,
    )
]


GRAPH_MIGRATIONS = [
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
            vector BLOB NOT NULL
        );
        CREATE INDEX graph_embeddings_owner ON graph_embeddings(owner);
        CREATE TABLE graph_connections (
            owner TEXT NOT NULL,
            from_id TEXT NOT NULL REFERENCES nodes(id) ON DELETE CASCADE,
            to_id TEXT NOT NULL REFERENCES nodes(id) ON DELETE CASCADE,
            relation_type TEXT NOT NULL,
            strength REAL NOT NULL,
            explanation TEXT NOT NULL DEFAULT '',
            PRIMARY KEY (owner, from_id, to_id, relation_type)
        ) WITHOUT ROWID;
        CREATE INDEX graph_connections_from ON graph_connections(from_id);
        CREATE INDEX graph_connections_to ON graph_connections(to_id);
        CREATE TABLE graph_tags (
            owner TEXT NOT NULL,
            tag TEXT NOT NULL,
            ts REAL NOT NULL,
            node_id TEXT NOT NULL REFERENCES nodes(id) ON DELETE CASCADE,
            ntags INTEGER NOT NULL,
            PRIMARY KEY (owner, tag, ts, node_id)
        ) WITHOUT ROWID;
        CREATE INDEX graph_tags_node ON graph_tags(node_id);
        """,
    ),
    Migration(
        11,
        "memory graph: full-text search over nodes",
        """
        CREATE VIEW graph_fts_source AS
            SELECT rowid AS node_rowid, 'o' || hex(owner) AS otok, content FROM nodes;
        CREATE VIRTUAL TABLE nodes_fts USING fts5(
            otok, content,
            content = 'graph_fts_source', content_rowid = 'node_rowid',
            tokenize = "porter unicode61 remove_diacritics 2"
        );
        CREATE TRIGGER nodes_fts_insert AFTER INSERT ON nodes BEGIN
            INSERT INTO nodes_fts(rowid, otok, content)
            VALUES (new.rowid, 'o' || hex(new.owner), new.content);
        END;
        CREATE TRIGGER nodes_fts_delete AFTER DELETE ON nodes BEGIN
            INSERT INTO nodes_fts(nodes_fts, rowid, otok, content)
            VALUES ('delete', old.rowid, 'o' || hex(old.owner), old.content);
        END;
        CREATE TRIGGER nodes_fts_update AFTER UPDATE OF owner, content ON nodes BEGIN
            INSERT INTO nodes_fts(nodes_fts, rowid, otok, content)
            VALUES ('delete', old.rowid, 'o' || hex(old.owner), old.content);
            INSERT INTO nodes_fts(rowid, otok, content)
            VALUES (new.rowid, 'o' || hex(new.owner), new.content);
        END;
        INSERT INTO nodes_fts(nodes_fts) VALUES ('rebuild');
        """,
    ),
    Migration(
        12,
        "memory graph: full-text search over each person's own words",
        # See core/storage/owner_words.py. Contentless: the words are in ``nodes`` already.
        f"""
        DROP TRIGGER nodes_fts_insert;
        DROP TRIGGER nodes_fts_delete;
        DROP TRIGGER nodes_fts_update;
        DROP TABLE nodes_fts;
        DROP VIEW graph_fts_source;
        CREATE VIRTUAL TABLE nodes_words USING fts5(
            words, content = '', detail = none, tokenize = "porter ascii"
        );
        CREATE TRIGGER nodes_words_insert AFTER INSERT ON nodes BEGIN
            INSERT INTO nodes_words(rowid, words)
            VALUES (new.rowid, {OWNER_WORDS}(new.owner, new.content));
        END;
        CREATE TRIGGER nodes_words_delete AFTER DELETE ON nodes BEGIN
            INSERT INTO nodes_words(nodes_words, rowid, words)
            VALUES ('delete', old.rowid, {OWNER_WORDS}(old.owner, old.content));
        END;
        CREATE TRIGGER nodes_words_update AFTER UPDATE OF owner, content ON nodes BEGIN
            INSERT INTO nodes_words(nodes_words, rowid, words)
            VALUES ('delete', old.rowid, {OWNER_WORDS}(old.owner, old.content));
            INSERT INTO nodes_words(rowid, words)
            VALUES (new.rowid, {OWNER_WORDS}(new.owner, new.content));
        END;
        INSERT INTO nodes_words(rowid, words)
            SELECT rowid, {OWNER_WORDS}(owner, content) FROM nodes;
        """,
    ),
    Migration(
        13,
        "memory graph: edges without foreign keys, a deleted node's edges removed by trigger",
        # Every edge written checked both of its ends as foreign keys and kept an index on
        # ``from_id`` for the cascade: ~a fifth of an edge's cost, and a message writes
        # ~15 edges under load. The write already checks that the target is a node of
        # the same owner (see _write_node), the source is the node written with it, and
        # (owner, from_id) is the key's prefix: the trigger below finds both ends' edges
        # through the key and ``graph_connections_to``.
        """
        CREATE TABLE graph_connections_13 (
            owner TEXT NOT NULL,
            from_id TEXT NOT NULL,
            to_id TEXT NOT NULL,
            relation_type TEXT NOT NULL,
            strength REAL NOT NULL,
            explanation TEXT NOT NULL DEFAULT '',
            PRIMARY KEY (owner, from_id, to_id, relation_type)
        ) WITHOUT ROWID;
        INSERT INTO graph_connections_13 SELECT
            owner, from_id, to_id, relation_type, strength, explanation
            FROM graph_connections;
        DROP TABLE graph_connections;
        ALTER TABLE graph_connections_13 RENAME TO graph_connections;
        CREATE INDEX graph_connections_to ON graph_connections(to_id);
        CREATE TRIGGER graph_connections_of_deleted_node AFTER DELETE ON nodes BEGIN
            DELETE FROM graph_connections WHERE owner = old.owner AND from_id = old.id;
            DELETE FROM graph_connections WHERE to_id = old.id;
        END;
        """,
    ),
    Migration(
        14,
        "memory graph: incoming edges indexed by owner, then target",
        # A new node's ~8 edges point at the same person's earlier nodes, which lie all
        # over an index on ``to_id`` alone (ids go by time, and so do everyone's
        # messages): each edge dirtied a page of its own, and each dirty page is written
        # to the log at commit and again by the checkpoint. Under (owner, to_id) they
        # share the person's few pages: a node's write went from ~24 logged pages to ~17.
        # Edges never cross people (see _write_node), so the trigger may name the owner.
        """
        DROP INDEX graph_connections_to;
        CREATE INDEX graph_connections_to ON graph_connections(owner, to_id);
        DROP TRIGGER graph_connections_of_deleted_node;
        CREATE TRIGGER graph_connections_of_deleted_node AFTER DELETE ON nodes BEGIN
            DELETE FROM graph_connections WHERE owner = old.owner AND from_id = old.id;
            DELETE FROM graph_connections WHERE owner = old.owner AND to_id = old.id;
        END;
        """,
    ),
    Migration(
        15,
        "memory graph: entity postings (people, pets, places a message names)",
        # One row per entity a node names (core.memory.entities), with the node's scope
        # and time copied: the latest mentions of an entity in the allowed scopes are one
        # index range. Deleted with the node (foreign key) and with the owner.
        """
        CREATE TABLE graph_entities (
            owner TEXT NOT NULL,
            entity TEXT NOT NULL,
            ts REAL NOT NULL,
            node_id TEXT NOT NULL REFERENCES nodes(id) ON DELETE CASCADE,
            scope TEXT NOT NULL,
            PRIMARY KEY (owner, entity, ts, node_id)
        ) WITHOUT ROWID;
        CREATE INDEX graph_entities_node ON graph_entities(node_id);
        """,
    ),
    Migration(
        16,
        "memory graph: a second vector per node (another encoder, e.g. USE beside e5)",
        # A second encoder's vector of a node (core.memory.graph, ``second``): searched
        # as a list of its own and fused by rank. Keyed by model: vectors of another
        # second model are never mixed in. Deleted with the node and with the owner.
        """
        CREATE TABLE graph_second_embeddings (
            node_id TEXT NOT NULL REFERENCES nodes(id) ON DELETE CASCADE,
            owner TEXT NOT NULL,
            model TEXT NOT NULL,
            dim INTEGER NOT NULL,
            vector BLOB NOT NULL,
            PRIMARY KEY (node_id, model)
        ) WITHOUT ROWID;
        CREATE INDEX graph_second_embeddings_owner ON graph_second_embeddings(owner, model);
        """,
    ),
]


MEMORY_MIGRATIONS = [
    Migration(
        30,
        "structured memories with history and full-text search",
        """
        CREATE TABLE structured_memories (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            id TEXT NOT NULL UNIQUE,
            owner TEXT NOT NULL,
            category TEXT NOT NULL,
            key TEXT NOT NULL,
            content TEXT NOT NULL,
            tags TEXT NOT NULL DEFAULT '[]',
            priority TEXT NOT NULL DEFAULT 'normal',
            source TEXT NOT NULL,
            verified INTEGER NOT NULL,
            verified_by TEXT,
            verified_at REAL,
            confidence REAL NOT NULL,
            expires_at REAL,
            scope TEXT NOT NULL DEFAULT 'dm',
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL,
            version INTEGER NOT NULL DEFAULT 1,
            UNIQUE (owner, category, key)
        );
        CREATE INDEX structured_memories_owner_updated ON structured_memories(owner, updated_at);
        CREATE INDEX structured_memories_owner_expires ON structured_memories(owner, expires_at);
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
            verified INTEGER NOT NULL,
            verified_by TEXT,
            confidence REAL NOT NULL,
            expires_at REAL,
            scope TEXT NOT NULL,
            valid_from REAL NOT NULL,
            replaced_at REAL NOT NULL,
            change TEXT NOT NULL,
            PRIMARY KEY (memory_id, version)
        );
        CREATE INDEX structured_memory_history_owner ON structured_memory_history(owner);
        CREATE VIRTUAL TABLE structured_memories_fts USING fts5(
            key, content, tags,
            content='structured_memories', content_rowid='seq',
            tokenize='unicode61 remove_diacritics 2'
        );
        CREATE TRIGGER structured_memories_ai AFTER INSERT ON structured_memories BEGIN
            INSERT INTO structured_memories_fts(rowid, key, content, tags)
            VALUES (new.seq, new.key, new.content, new.tags);
        END;
        CREATE TRIGGER structured_memories_ad AFTER DELETE ON structured_memories BEGIN
            INSERT INTO structured_memories_fts(structured_memories_fts, rowid, key, content, tags)
            VALUES ('delete', old.seq, old.key, old.content, old.tags);
        END;
        CREATE TRIGGER structured_memories_au AFTER UPDATE ON structured_memories BEGIN
            INSERT INTO structured_memories_fts(structured_memories_fts, rowid, key, content, tags)
            VALUES ('delete', old.seq, old.key, old.content, old.tags);
            INSERT INTO structured_memories_fts(rowid, key, content, tags)
            VALUES (new.seq, new.key, new.content, new.tags);
        END;
        """,
    )
]


FEEDBACK_MIGRATIONS = [
    Migration(
        70,
        "feedback: reply messages, ratings of replies, mood corrections",
        # Telegram numbers messages per chat, so a bot message is known by its chat too.
        """
        CREATE TABLE feedback_replies (
            owner TEXT NOT NULL,
            chat_id TEXT NOT NULL,
            message_id TEXT NOT NULL,
            node_id TEXT NOT NULL,
            at REAL NOT NULL,
            PRIMARY KEY (owner, chat_id, message_id)
        );
        CREATE TABLE feedback_ratings (
            owner TEXT NOT NULL,
            node_id TEXT NOT NULL,
            rating TEXT NOT NULL,
            chat_id TEXT NOT NULL,
            message_id TEXT NOT NULL,
            emoji TEXT NOT NULL,
            at REAL NOT NULL,
            PRIMARY KEY (owner, node_id, rating)
        );
        CREATE TABLE mood_corrections (
            id TEXT PRIMARY KEY,
            owner TEXT NOT NULL,
            node_id TEXT,
            text TEXT NOT NULL,
            predicted TEXT NOT NULL,
            predicted_score REAL,
            corrected TEXT NOT NULL,
            at REAL NOT NULL
        );
        CREATE INDEX mood_corrections_owner_at ON mood_corrections(owner, at);
        """,
    )
]


PROFILE_MIGRATIONS = [
    Migration(
        40,
        "learned profile counters (topics, style, languages)",
        """
        CREATE TABLE profile_counters (
            owner TEXT NOT NULL,
            kind TEXT NOT NULL,
            name TEXT NOT NULL,
            weight REAL NOT NULL,
            total REAL NOT NULL,
            first_at REAL NOT NULL,
            last_at REAL NOT NULL,
            PRIMARY KEY (owner, kind, name)
        ) WITHOUT ROWID;
        """,
    )
]


MIGRATIONS: list[Migration] = [
    *NODE_MIGRATIONS,
    *CHANGE_MIGRATIONS,
    *GRAPH_MIGRATIONS,
    *MEMORY_MIGRATIONS,
    *PROFILE_MIGRATIONS,
    *FEEDBACK_MIGRATIONS,
]
