"""Turn kinds in the plain search (the CLI's, HTTP's, LoCoMo's), on a real SQLite file with
the hashing embedder: what the person stated outranks the question they asked and the
bot's reply when all three match the query alike."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from core.embeddings import HashingEmbedder
from core.memory.graph import GraphConfig, GraphMemory
from core.storage import MemoryNode, NodeType, SQLiteStorage

OWNER = "telegram:78"
OWNERS = [OWNER]  # users in the storage fixture (conftest)
T0 = datetime(2018, 6, 1, 10, 0, tzinfo=UTC)
QUERY = "dentista em Porto Alegre na quinta"

# Different days (no follow-up edges between them): only the ranking decides. The
# question and the reply repeat the query's words more closely than the statement.
LINES = [
    ("asked", NodeType.USER_MESSAGE, "dentista em Porto Alegre na quinta, será que dói?"),
    ("reply", NodeType.AKIRA_RESPONSE, "dentista em Porto Alegre na quinta: vai dar tudo certo"),
    (
        "stated",
        NodeType.USER_MESSAGE,
        "marquei dentista pra quinta, em Porto Alegre, às oito com a doutora Sílvia",
    ),
    ("c1", NodeType.USER_MESSAGE, "o ônibus atrasou quarenta minutos hoje"),
    ("c2", NodeType.USER_MESSAGE, "comprei um fone novo, o antigo quebrou"),
    ("c3", NodeType.USER_MESSAGE, "fiz uma faxina geral no apartamento"),
    ("c4", NodeType.USER_MESSAGE, "meu notebook tá lento demais"),
    ("c5", NodeType.USER_MESSAGE, "choveu o dia inteiro e fiquei vendo série"),
]


async def ranked(storage: SQLiteStorage, turn_kinds: bool) -> list[str]:
    base = GraphConfig()
    config = replace(base, search=replace(base.search, turn_kinds=turn_kinds, diversity=0.0))
    memory = GraphMemory(storage, HashingEmbedder(), config=config)
    for day, (node_id, kind, text) in enumerate(LINES):
        node = MemoryNode(
            id=node_id,
            owner=OWNER,
            content=text,
            type=kind,
            timestamp=T0 + timedelta(days=day),
            chat_id="dm-78",
        )
        await memory.store(node)
    found = await memory.search_with_connections(QUERY, OWNER, limit=3)
    return [r.node.id for r in found]


async def test_what_the_person_stated_comes_before_their_question_and_the_reply(
    storage: SQLiteStorage,
) -> None:
    # The reply (x0.7) before the question (x0.6): it at least answers about them.
    assert await ranked(storage, turn_kinds=True) == ["stated", "reply", "asked"]


async def test_without_turn_kinds_the_closer_wording_wins(storage: SQLiteStorage) -> None:
    assert await ranked(storage, turn_kinds=False) == ["reply", "asked", "stated"]
