"""Emotion detection quality: ``python benchmarks/emotion_eval.py [FILE.tsv ...] [--detector ...]``.

Prints JSON keyed by file: for the chosen detector and the lexicon baseline (same run),
macro-F1, per-label precision and recall, the confusion matrix (rows = true label,
columns = predicted, in ``labels`` order), the median latency per message (one
``detect`` call per message, as the pipeline does) and, for Portuguese files, the share
of neutral messages read as agressivo.

Files are TSVs whose header names ``text`` and ``label`` columns. The defaults are the
held-out dev files in ``shared/data`` (never used for training).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

# Runnable as a plain script from a checkout: make the repository importable.
REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from core.embeddings import build_embedder  # noqa: E402
from core.emotion import LABELS, EmotionDetector, build_detector  # noqa: E402
from core.emotion.data import missing_data, read_labelled_tsv  # noqa: E402

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
    predicted: list[str] = []
    latencies: list[float] = []
    for text in texts:
        start = time.perf_counter()
        predicted.append(detector.detect(text).label)
        latencies.append((time.perf_counter() - start) * 1000)
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
        "detector": detector.name,
        "n": len(texts),
        "macro_f1": round(sum(f1s) / len(f1s), 4) if f1s else 0.0,
        "per_label": per_label,
        "confusion": {"labels": labels, "matrix": matrix},
        "latency_ms_median": round(statistics.median(latencies), 3) if latencies else 0.0,
    }
    if portuguese:
        neutral = [p for t, p in zip(truth, predicted, strict=True) if t == "neutro"]
        result["neutral_as_agressivo"] = (
            round(sum(p == "agressivo" for p in neutral) / len(neutral), 4) if neutral else None
        )
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="*", type=Path, help="TSV files with text and label columns")
    parser.add_argument(
        "--detector",
        default="classifier",
        choices=["classifier", "ensemble", "finetuned", "auto", "transformers", "lexicon"],
        help="classifier = the shipped default (the detector whose recipe is marked default "
        "when it loads, else the embedding classifier); pass --weights to force the "
        "embedding classifier",
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
    args = parser.parse_args(argv)
    for path in args.files or DEFAULT_FILES:
        if problem := missing_data(path):
            parser.error(problem)

    embedder = None
    if args.embedding_backend:
        embedder = build_embedder(args.embedding_backend, args.embedding_model)
    detector = build_detector(
        args.detector,
        embedder=embedder,
        model=args.model,
        weights=args.weights,
        strict=args.detector in ("classifier", "ensemble", "finetuned"),
    )
    baseline = build_detector("lexicon", embedder=None)
    report: dict[str, object] = {}
    for path in args.files or DEFAULT_FILES:
        rows = read_labelled_tsv(path)
        if args.limit:
            rows = rows[: args.limit]
        texts = [r.text for r in rows]
        truth = [r.label for r in rows]
        portuguese = is_portuguese_file(path)
        detector.detect("warm up")  # first-call costs are not per-message latency
        report[str(path)] = {
            "ours": evaluate(detector, texts, truth, portuguese),
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
