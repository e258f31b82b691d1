"""The learned readings of requests and self-descriptions (core.memory.heads): the shipped
weights read USE vectors (multilingual v3, the app's second encoder), and recall takes a
request or a constraint the word grammar misses when its head reads it. A real SQLite
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
from core.memory.graph import GraphMemory
from core.memory.heads import DEFAULT_HEADS, LinearHead, RecallHeads, load_heads, save_heads
from core.memory.query import QueryConfig, asks_for_help, describes_self, plan_query, self_priors
from core.storage import MemoryNode, SQLiteStorage
from tests.core.memory.conftest import CHATTER_PT, said
from training.recall.heads import fit_head, main

OWNER = "telegram:31"
OWNERS = [OWNER]  # users in the storage fixture (conftest)
T0 = datetime(2026, 2, 2, 19, 0, tzinfo=UTC)

# Written for this test (in no dev set): forms the grammar does not read.
REQUESTS = [
    "sábado vou num aniversário, qual vinho eu levo?",
    "tô com fome e sem ideia nenhuma pra janta",
    "got a free evening, what's good to do around here?",
]
CONSTRAINTS = [
    "meu marido não pode nem sentir cheiro de amendoim, fecha a garganta dele",
    "não tenho carro, ando de bicicleta pra tudo",
]
NEITHER = [
    "o ônibus atrasou de novo hoje",
    "finally got the washing machine fixed",
    "minha irmã chega amanhã",
]


def line(node_id: str, text: str, at: datetime) -> MemoryNode:
    return said(OWNER, node_id, text, at, chat_id="dm-31")


@pytest.fixture(scope="module")
def use() -> USEEmbedder:
    return USEEmbedder()


def test_the_shipped_heads_read_only_the_encoder_they_were_fitted_on(use: USEEmbedder) -> None:
    assert load_heads(use.name) is not None
    assert load_heads(HashingEmbedder().name) is None
    recipe = json.loads(DEFAULT_HEADS.with_suffix(".json").read_text(encoding="utf-8"))
    assert recipe["encoder"] == use.name
    # The newest blind sets check the heads: never fitted on.
    assert not {"recall_heldout12.txt", "recall_heldout13.txt"} & set(recipe["sets"])


def test_the_heads_read_what_the_grammar_misses(use: USEEmbedder) -> None:
    heads = load_heads(use.name)
    assert heads is not None
    config = QueryConfig()
    for text in REQUESTS:
        assert not asks_for_help(text), text  # else this would not test the head
        assert heads.asks.probabilities(use.embed_query(text)) > config.asks_threshold, text
    for text in CONSTRAINTS:
        assert not describes_self(text), text
        assert heads.states.probabilities(use.embed_query(text)) > config.states_threshold, text
    for text in NEITHER:
        vector = use.embed_query(text)
        assert heads.asks.probabilities(vector) < config.asks_threshold, text
        assert heads.states.probabilities(vector) < config.states_threshold, text


async def test_a_request_in_other_words_finds_the_constraint_it_must_fit(
    storage: SQLiteStorage, use: USEEmbedder
) -> None:
    memory = GraphMemory(storage, HashingEmbedder())
    memory.use_second(use)
    await memory.store(line("peanut", CONSTRAINTS[0], T0))
    at = T0 + timedelta(days=1)
    for i, text in enumerate(CHATTER_PT):
        await memory.store(line(f"c{i}", text, at))
        at += timedelta(hours=7)
    request = line("q", REQUESTS[1], at + timedelta(days=2))
    await memory.store(request)

    async def rank(heads: str) -> int:
        memory.config = replace(memory.config, query=replace(memory.config.query, heads=heads))
        recall = await memory.recall(
            OWNER, request.content, scopes=None, limit=10, exclude_ids=["q"], at=request.timestamp
        )
        return [r.node.id for r in recall.nodes].index("peanut")

    # The shipped heads read the request and the constraint: it comes first. The
    # grammar alone reads neither ("off"), and the words share nothing with the line.
    assert await rank("") == 0
    assert await rank("off") > 0


def test_self_priors_take_the_lines_a_head_reads_beside_the_grammar() -> None:
    """Two-dimensional vectors and heads written here: the first axis reads as asking,
    the second as stating a constraint."""
    ask = LinearHead(np.zeros(2, np.float32), np.ones(2, np.float32), np.array([8.0, 0.0]), -4.0)
    state = LinearHead(np.zeros(2, np.float32), np.ones(2, np.float32), np.array([0.0, 8.0]), -4.0)
    heads = RecallHeads("test-encoder", ask, state)
    pool = [
        line("grammar", "sou vegetariana", T0),
        line("head", "meu marido não pode nem sentir cheiro de amendoim", T0),
        line("asked", "o amendoim faz mal mesmo?", T0),  # a question states nothing
        line("plain", "o ônibus atrasou", T0),
    ]
    vectors = {n.id: np.array([0.0, 1.0], np.float32) for n in pool}
    vectors["plain"] = np.array([0.0, 0.0], np.float32)
    vectors["grammar"] = np.array([0.0, 0.0], np.float32)
    config = QueryConfig()
    plan = plan_query("tô com fome e sem ideia nenhuma pra janta", T0 + timedelta(days=1))
    assert not plan.helps
    asking = (np.array([1.0, 0.0], np.float32), vectors)
    seeds = self_priors(plan, asking[0], pool, vectors, config=config, second=asking, heads=heads)
    assert sorted(seeds) == ["grammar", "head"]
    # Without the heads, or when the head does not read the message as asking: nothing.
    assert self_priors(plan, asking[0], pool, vectors, config=config, second=asking) == {}
    telling = (np.array([0.0, 0.0], np.float32), vectors)
    assert (
        self_priors(plan, asking[0], pool, vectors, config=config, second=telling, heads=heads)
        == {}
    )


def test_weights_written_and_read_back_and_a_broken_file_is_none(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    rng = np.random.default_rng(3)
    x = rng.standard_normal((200, 4)).astype(np.float32)
    y = (x[:, 0] + 0.3 * x[:, 1] > 0.5).astype(float)
    head = fit_head(x, y, penalty=1.0)
    said_yes = head.probabilities(x) > 0.5
    assert (said_yes == (y == 1)).mean() > 0.9  # it learnt the rule it was shown
    path = tmp_path / "heads.npz"
    save_heads(RecallHeads("enc", head, head), path, {"sets": ["x"]})
    back = load_heads("enc", path)
    assert back is not None
    assert np.allclose(back.asks.probabilities(x), head.probabilities(x), atol=1e-5)
    # Heads written before the opens head existed load without it; with it, it is read.
    assert back.opens is None
    three = tmp_path / "three.npz"
    save_heads(RecallHeads("enc", head, head, opens=head), three, {"sets": ["x"]})
    back = load_heads("enc", three)
    assert back is not None and back.opens is not None
    assert np.allclose(back.opens.probabilities(x), head.probabilities(x), atol=1e-5)
    by_id = back.opens.read({"a": x[0], "b": x[1]})
    assert set(by_id) == {"a", "b"}
    assert np.isclose(by_id["b"], head.probabilities(x[1]), atol=1e-5)
    assert back.opens.read({}) == {}
    assert load_heads("another", path) is None
    broken = tmp_path / "broken.npz"
    broken.write_bytes(b"\x00not a zip")
    broken.with_suffix(".json").write_text('{"encoder": "enc"}', encoding="utf-8")
    with caplog.at_level(logging.WARNING):
        assert load_heads("enc", broken) is None
    assert "recall heads not loaded" in caplog.text


def test_the_training_command_writes_heads_recall_can_load(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], use: USEEmbedder
) -> None:
    out = tmp_path / "heads.npz"
    sets = ["recall_dev.txt", "recall_heldout.txt"]
    main(["--sets", *sets, "--out", str(out), "--threshold", "0.7"])
    report = json.loads(capsys.readouterr().out)
    assert report["sets"] == sets
    assert report["positives"]["asks"] > 0 and report["positives"]["states"] > 0
    # Each set read by a head fitted on the other.
    folds = report["out_of_fold"]["asks"]
    assert sum(f["positives"] for f in folds.values()) == report["positives"]["asks"]
    assert all(0 <= f["head_found"] <= f["positives"] for f in folds.values())
    heads = load_heads(use.name, out)
    assert heads is not None
    # Fitted on the dev chats' requests, it reads one of them as asking.
    assert heads.asks.probabilities(use.embed_query("me indica algum filme?")) > 0.5
    assert report["positives"]["opens"] > 0 and heads.opens is not None


def test_the_shipped_opens_head_reads_matters_above_chatter(use: USEEmbedder) -> None:
    heads = load_heads(use.name)
    assert heads is not None and heads.opens is not None
    # Written for this test: matters a later message may take up without their words,
    # and everyday lines that open none.
    matters = [
        "o carro tá fazendo um barulho estranho quando passo em buraco",
        "the dentist says I need a root canal on that back tooth",
        "minha mãe vai fazer uma biópsia mês que vem, tô com medo",
        "my landlord wants to raise the rent again, we're arguing about it",
    ]
    chatter = [
        "hoje o céu tava lindo no fim da tarde",
        "made pancakes for breakfast",
        "to ouvindo um podcast bem legal",
        "the cat is asleep on my keyboard again",
    ]
    read = {
        "matters": heads.opens.probabilities(np.stack([use.embed_query(t) for t in matters])),
        "chatter": heads.opens.probabilities(np.stack([use.embed_query(t) for t in chatter])),
    }
    assert read["matters"].min() > read["chatter"].max(), read
