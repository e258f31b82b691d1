"""Emotion detection quality: ``python benchmarks/emotion_eval.py [FILE.tsv ...] [--detector ...]``.

Prints JSON keyed by file: for the chosen detector and the lexicon baseline (same run),
macro-F1, per-label precision and recall, the confusion matrix (rows = true label,
columns = predicted, in ``labels`` order), the expected calibration error of the scores,
the median latency per message (one ``detect`` call per message, as the pipeline does)
and, for Portuguese files, the share of neutral messages read as agressivo.

``--detector llm --llm-base-url URL [--llm-model NAME]``: the LLM judge
(:mod:`core.emotion.llm_judge`) at any OpenAI-compatible endpoint (key from
``AKIRA_LLM__API_KEY``), the shipped classifier answering where it fails. The same
judgements also give the tie-breaker's figures (``judge.tie_breaker``: the judge's reading
only where the classifier scored under ``--judge-below``, as the pipeline does with an
``openai`` provider), and ``--save-judgements FILE`` keeps each row's two readings (JSON
lines) for later analysis.

Files are TSVs whose header names ``text`` and ``label`` columns. The defaults are the
held-out dev files in ``shared/data`` (never used for training).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import statistics
import sys
import time
from pathlib import Path

# Runnable as a plain script from a checkout: make the repository importable.
REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402
from pydantic import SecretStr  # noqa: E402

from core.embeddings import build_embedder  # noqa: E402
from core.emotion import LABELS, EmotionDetector, EmotionReading, build_detector  # noqa: E402
from core.emotion.classifier import DEFAULT_WEIGHTS, ClassifierDetector, read_recipe  # noqa: E402
from core.emotion.data import missing_data, read_labelled_tsv  # noqa: E402
from core.emotion.encoders import CombinedEmbedder, embedder_for  # noqa: E402
from core.emotion.llm_judge import LLMJudge, combine, gather_bounded  # noqa: E402
from core.llm.config import LLMConfig  # noqa: E402
from core.llm.factory import build_provider  # noqa: E402
from training.emotion.calibration import expected_calibration_error  # noqa: E402
from training.emotion.embedcache import CachedEmbedder  # noqa: E402

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
DEFAULT_FILES = [
    DATA / "emotion" / "goemotions" / "goemotions_dev_5label.tsv",
    DATA / "emotion" / "brighter" / "brighter_ptbr_dev_5label.tsv",
]


def is_portuguese_file(path: Path) -> bool:
    """Judged by the file name (``brighter_ptbr_dev_5label.tsv``, ``my_pt_chat.tsv``)."""
    name = path.stem.lower()
    return any(key in name for key in ("ptbr", "pt-br", "portug")) or "pt" in name.split("_")


def evaluate(
    detector: EmotionDetector, texts: list[str], truth: list[str], portuguese: bool
) -> dict[str, object]:
    readings: list[EmotionReading] = []
    latencies: list[float] = []
    for text in texts:
        start = time.perf_counter()
        readings.append(detector.detect(text))
        latencies.append((time.perf_counter() - start) * 1000)
    return score(detector.name, readings, truth, portuguese, latencies)


def score(
    name: str,
    readings: list[EmotionReading],
    truth: list[str],
    portuguese: bool,
    latencies: list[float],
) -> dict[str, object]:
    """Macro-F1, per-label precision/recall, confusion, latency and the expected
    calibration error of the readings' scores (10 equal-width bins)."""
    predicted = [r.label for r in readings]
    labels = list(LABELS) + sorted({*truth, *predicted} - set(LABELS))
    index = {label: i for i, label in enumerate(labels)}
    matrix = [[0] * len(labels) for _ in labels]
    for t, p in zip(truth, predicted, strict=True):
        matrix[index[t]][index[p]] += 1
    per_label: dict[str, dict[str, float | int]] = {}
    f1s = []
    for label in labels:
        i = index[label]
        tp = matrix[i][i]
        predicted_n = sum(row[i] for row in matrix)
        support = sum(matrix[i])
        precision = tp / predicted_n if predicted_n else 0.0
        recall = tp / support if support else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        per_label[label] = {
            "precision": round(precision, 4),
            "recall": round(recall, 4),
            "f1": round(f1, 4),
            "support": support,
        }
        if support:  # macro-F1 over the labels the file contains
            f1s.append(f1)
    result: dict[str, object] = {
        "detector": name,
        "n": len(readings),
        "macro_f1": round(sum(f1s) / len(f1s), 4) if f1s else 0.0,
        "per_label": per_label,
        "confusion": {"labels": labels, "matrix": matrix},
        "ece": round(
            expected_calibration_error(
                np.array([r.score for r in readings]),
                np.array([p == t for p, t in zip(predicted, truth, strict=True)]),
            ),
            4,
        ),
        "latency_ms_median": round(statistics.median(latencies), 3) if latencies else 0.0,
    }
    if portuguese:
        neutral = [p for t, p in zip(truth, predicted, strict=True) if t == "neutro"]
        result["neutral_as_agressivo"] = (
            round(sum(p == "agressivo" for p in neutral) / len(neutral), 4) if neutral else None
        )
    return result


def save_row(
    path: Path, text: str, truth: str, base: EmotionReading, judged: EmotionReading | None
) -> None:
    """One JSON line: the text, its true label, the classifier's and the judge's readings."""
    row = {
        "text": text,
        "truth": truth,
        "classifier": [base.label, round(base.score, 4)],
        "judge": None if judged is None else [judged.label, judged.score],
    }
    with path.open("a", encoding="utf-8") as out:
        out.write(json.dumps(row, ensure_ascii=False) + "\n")


def evaluate_judge(
    fallback: EmotionDetector,
    provider_config: LLMConfig,
    texts: list[str],
    truth: list[str],
    portuguese: bool,
    *,
    concurrency: int,
    timeout_s: float,
    judge_below: float = 0.5,
    save_to: Path | None = None,
) -> dict[str, object]:
    """The ``llm`` detector: every text judged by the endpoint (``concurrency`` requests
    at a time), the classifier's reading where the judge failed. Latency = per request.
    ``tie_breaker``: the same judgements used only where the classifier's score is under
    ``judge_below`` (the other rows keep the classifier's reading)."""
    base = fallback.detect_many(texts)

    async def run() -> tuple[list[EmotionReading | None], list[float], LLMJudge]:
        provider = build_provider(provider_config)
        await provider.start()
        latencies: list[float] = []
        judge = LLMJudge(provider, timeout_s=timeout_s)

        async def timed(i: int) -> EmotionReading | None:
            start = time.perf_counter()
            judged = None
            try:
                judged = await judge.judge(texts[i])
                return judged
            finally:
                latencies.append((time.perf_counter() - start) * 1000)
                if save_to is not None:  # row by row: an interrupted run keeps what it had
                    save_row(save_to, texts[i], truth[i], base[i], judged)

        try:
            calls = [functools.partial(timed, i) for i in range(len(texts))]
            return await gather_bounded(calls, concurrency), latencies, judge
        finally:
            await provider.close()

    judged, latencies, judge = asyncio.run(run())
    readings = [combine(b, j) for b, j in zip(base, judged, strict=True)]
    result = score("llm", readings, truth, portuguese, latencies)
    unsure = [b.score < judge_below for b in base]
    tie_breaker = score(
        "classifier+judge",
        [combine(b, j if u else None) for b, j, u in zip(base, judged, unsure, strict=True)],
        truth,
        portuguese,
        [],
    )
    tie_breaker["judge_below"] = judge_below
    tie_breaker["asked"] = sum(unsure)
    result["judge"] = {
        "endpoint": provider_config.resolved_base_url(),
        "model": provider_config.resolved_model(),
        "asked": judge.asked,
        "failed": judge.failed,
        "judged_only": score(
            "llm-judged-rows",
            [j for j in judged if j is not None],
            [t for j, t in zip(judged, truth, strict=True) if j is not None],
            portuguese,
            [],
        )
        if any(j is not None for j in judged)
        else None,
        "classifier": score("classifier", base, truth, portuguese, []),
        "tie_breaker": tie_breaker,
    }
    return result


def cached_classifier(weights: Path, cache_dir: Path) -> ClassifierDetector:
    """The classifier of ``weights`` over its encoders, each looking vectors up in
    ``cache_dir`` first."""
    built = embedder_for(read_recipe(weights)["embedder"])
    parts = built.parts if isinstance(built, CombinedEmbedder) else (built,)
    cached = [CachedEmbedder(part, cache_dir) for part in parts]
    return ClassifierDetector(CombinedEmbedder(cached) if len(cached) > 1 else cached[0], weights)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="*", type=Path, help="TSV files with text and label columns")
    parser.add_argument(
        "--detector",
        default="classifier",
        choices=["classifier", "ensemble", "finetuned", "auto", "transformers", "lexicon", "llm"],
        help="classifier = the shipped default (the detector whose recipe is marked default "
        "when it loads, else the embedding classifier); pass --weights to force the "
        "embedding classifier; llm = the LLM judge at --llm-base-url (any OpenAI-compatible "
        "endpoint; AKIRA_LLM__BASE_URL/MODEL/API_KEY are read too), the classifier where it fails",
    )
    parser.add_argument("--llm-base-url", default=os.environ.get("AKIRA_LLM__BASE_URL"))
    parser.add_argument("--llm-model", default=os.environ.get("AKIRA_LLM__MODEL"))
    parser.add_argument(
        "--llm-concurrency", type=int, default=4, help="judge requests in flight at once"
    )
    parser.add_argument("--llm-timeout", type=float, default=20.0, help="seconds a request")
    parser.add_argument(
        "--judge-below",
        type=float,
        default=0.5,
        help="llm: the tie-breaker's figures judge the rows the classifier scored under this",
    )
    parser.add_argument(
        "--save-judgements",
        type=Path,
        default=None,
        help="llm: append each row's classifier and judge readings here (JSON lines)",
    )
    parser.add_argument(
        "--sample",
        type=int,
        default=0,
        help="evaluate a fixed random sample of N rows of each file (seed 0), after --limit",
    )
    parser.add_argument(
        "--embedding-backend", default=None, help="default: the one the classifier was trained on"
    )
    parser.add_argument("--embedding-model", default=None)
    parser.add_argument("--model", default=None, help="transformers model id or path")
    parser.add_argument(
        "--weights",
        type=Path,
        default=None,
        help="classifier weights .npz (recipe .json beside it); default: the shipped ones",
    )
    parser.add_argument(
        "--limit", type=int, default=0, help="evaluate only the first N rows of each file"
    )
    parser.add_argument(
        "--embedding-cache",
        type=Path,
        default=None,
        help="classifier and llm: look query vectors up in this training cache first "
        "(training.emotion.embedcache; quality figures only, latency then means nothing)",
    )
    args = parser.parse_args(argv)
    for path in args.files or DEFAULT_FILES:
        if problem := missing_data(path):
            parser.error(problem)

    embedder = None
    if args.embedding_backend:
        embedder = build_embedder(args.embedding_backend, args.embedding_model)
    llm_config = None
    if args.detector == "llm":
        if not args.llm_base_url:
            parser.error("--detector llm needs --llm-base-url (or AKIRA_LLM__BASE_URL)")
        llm_config = LLMConfig(
            provider="openai",
            base_url=args.llm_base_url,
            model=args.llm_model,
            api_key=SecretStr(key) if (key := os.environ.get("AKIRA_LLM__API_KEY")) else None,
            max_retries=1,
            timeout_s=args.llm_timeout,
        )
    if args.embedding_cache is not None:
        if args.detector not in ("classifier", "llm"):
            parser.error("--embedding-cache works with --detector classifier or llm only")
        detector: EmotionDetector = cached_classifier(
            args.weights or DEFAULT_WEIGHTS, args.embedding_cache
        )
    else:
        detector = build_detector(
            "classifier" if args.detector == "llm" else args.detector,
            embedder=embedder,
            model=args.model,
            weights=args.weights,
            strict=args.detector in ("classifier", "ensemble", "finetuned", "llm"),
        )
    baseline = build_detector("lexicon", embedder=None)
    report: dict[str, object] = {}
    for path in args.files or DEFAULT_FILES:
        rows = read_labelled_tsv(path)
        if args.limit:
            rows = rows[: args.limit]
        if args.sample and args.sample < len(rows):
            keep = np.random.default_rng(0).choice(len(rows), args.sample, replace=False)
            rows = [rows[i] for i in sorted(keep.tolist())]
        texts = [r.text for r in rows]
        truth = [r.label for r in rows]
        portuguese = is_portuguese_file(path)
        detector.detect("warm up")  # first-call costs are not per-message latency
        ours = (
            evaluate_judge(
                detector,
                llm_config,
                texts,
                truth,
                portuguese,
                concurrency=args.llm_concurrency,
                timeout_s=args.llm_timeout,
                judge_below=args.judge_below,
                save_to=args.save_judgements,
            )
            if llm_config is not None
            else evaluate(detector, texts, truth, portuguese)
        )
        report[str(path)] = {
            "ours": ours,
            "lexicon": evaluate(baseline, texts, truth, portuguese),
        }
    recipe = getattr(detector, "recipe", None)
    if recipe:
        report["classifier"] = {
            "detector": detector.name,
            "embedder": recipe.get("embedder")
            or recipe.get("base_model")
            or recipe.get("components"),
            "architecture": recipe.get("architecture"),
            "trained_at": recipe.get("trained_at"),
        }
    print(json.dumps(report, indent=2, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
