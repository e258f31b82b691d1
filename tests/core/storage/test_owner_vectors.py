"""The per-owner vector index: exact search, and binary codes + exact rescoring beyond
``EXACT_SEARCH_MAX_ROWS`` rows."""

from __future__ import annotations

import numpy as np
import pytest

from core.storage import vector_cache
from core.storage.sqlite_graph import _OwnerVectors

DIM = 384


def anisotropic(rng: np.random.Generator, n: int, topics: int = 500) -> np.ndarray:
    """Unit vectors that all lean one way, like e5 embeddings (every cosine high), in
    tight groups of related texts."""
    centres = rng.standard_normal((topics, DIM)).astype(np.float32)
    rows = 4 * np.ones(DIM, np.float32) + centres[np.arange(n) % topics]
    rows = (rows + 0.15 * rng.standard_normal((n, DIM))).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def filled(vectors: np.ndarray, scopes: tuple[str, ...] = ("dm",)) -> _OwnerVectors:
    index = _OwnerVectors(DIM)
    for i, v in enumerate(vectors):
        index.append(f"n{i}", v, float(i), scopes[i % len(scopes)])
    return index


@pytest.fixture
def approximate(monkeypatch: pytest.MonkeyPatch) -> None:
    """Binary codes from 500 rows on, rescoring at least 100 candidates."""
    monkeypatch.setattr(vector_cache, "EXACT_SEARCH_MAX_ROWS", 500)
    monkeypatch.setattr(vector_cache, "RESCORE_MIN", 100)
    monkeypatch.setattr(vector_cache, "RESCORE_SHARE", 0.05)


def exact_top(vectors: np.ndarray, query: np.ndarray, k: int) -> list[str]:
    sims = vectors @ query
    return [f"n{i}" for i in np.argsort(-sims, kind="stable")[:k]]


def test_exact_search_ranks_by_cosine() -> None:
    rng = np.random.default_rng(1)
    vectors = anisotropic(rng, 300)
    index = filled(vectors)
    query = vectors[17]
    found = index.search(query, 10, None, (), None)
    assert [i for i, _ in found] == exact_top(vectors, query, 10)
    assert found[0] == ("n17", pytest.approx(1.0, abs=1e-5))
    assert index.codes is None  # small owners never pay for codes


@pytest.mark.usefixtures("approximate")
def test_binary_codes_keep_the_true_top_ten() -> None:
    rng = np.random.default_rng(2)
    vectors = anisotropic(rng, 5000)  # 500 groups of 10
    index = filled(vectors)
    recalls = []
    for group in range(0, 500, 10):
        query = vectors[group] + 0.05 * rng.standard_normal(DIM).astype(np.float32)
        query /= np.linalg.norm(query)
        truth = set(exact_top(vectors, query, 10))
        found = [i for i, _ in index.search(query, 10, None, (), None)]
        recalls.append(len(truth & set(found)) / 10)
    assert index.codes is not None
    # 250 of 5,000 rows rescored; uncentred signs would be the same for every row.
    assert np.mean(recalls) >= 0.9


@pytest.mark.usefixtures("approximate")
def test_approximate_search_respects_scope_time_and_exclusions() -> None:
    rng = np.random.default_rng(3)
    vectors = anisotropic(rng, 2000)
    index = filled(vectors, scopes=("dm", "server-1"))
    query = vectors[1001]  # a server-1 row (odd index)
    found = index.search(query, 20, ["dm"], ["n10", "n12"], 1500.0)
    assert found
    for node_id, _ in found:
        i = int(node_id[1:])
        assert i % 2 == 0 and i <= 1500 and node_id not in {"n10", "n12"}
    assert "n1001" not in {i for i, _ in found}
    # Without filters the row itself comes first.
    assert index.search(query, 1, None, (), None)[0][0] == "n1001"


@pytest.mark.usefixtures("approximate")
def test_rows_appended_after_the_codes_are_found() -> None:
    rng = np.random.default_rng(4)
    vectors = anisotropic(rng, 1000)
    index = filled(vectors)
    index.search(vectors[0], 5, None, (), None)  # builds the codes
    assert index.codes is not None
    late = anisotropic(rng, 200)
    for j, v in enumerate(late):
        index.append(f"late{j}", v, 5000.0 + j, "dm")
    assert index.search(late[150], 1, None, (), None)[0][0] == "late150"


@pytest.mark.usefixtures("approximate")
def test_newest_window_limits_the_candidates() -> None:
    rng = np.random.default_rng(5)
    vectors = anisotropic(rng, 3000)
    index = filled(vectors)
    found = index.search(vectors[10], 5, None, (), None, newest=1000)
    assert found and all(int(i[1:]) >= 2000 for i, _ in found)
    assert index.search(vectors[10], 5, None, (), None, newest=0) == []
    # A window larger than the history is the whole history.
    assert index.search(vectors[10], 1, None, (), None, newest=10**6)[0][0] == "n10"
