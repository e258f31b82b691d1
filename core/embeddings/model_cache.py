"""Files derived from a model package, kept between starts so a start reads instead of
rebuilds them (a tokenizer's tables, decompressed weights, an ONNX graph).

An entry is a folder ``<root>/<name>-<key>`` with a ``manifest.json``: ``key`` names
everything the files were derived from (the package's version, its model files'
checksums, this code's format), so a new package version finds no entry and builds a new
one (older entries of the same name are removed then). An entry is written in a
temporary folder and renamed into place when complete, so a start never reads half an
entry; one whose files do not match its manifest (sizes; checksums of the small ones) or
that its reader cannot read is removed and rebuilt. Caching is best effort: a cache that
cannot be written (read-only, disk full) only costs the rebuild at every start.

The root is set once by the app (:func:`set_root`, ``<data_dir>/cache`` unless
``AKIRA_CACHE_DIR`` says otherwise); without one, nothing is cached.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")
log = logging.getLogger(__name__)

# Files up to this size are checksummed at every read; larger ones (decompressed weight
# tables, read through mmap) are checked by size, which is what a crash or a full disk
# leaves wrong: hashing them would cost a good part of what the cache saves.
CHECKSUM_LIMIT = 16 << 20
_root: Path | None = None


def set_root(path: Path | None) -> None:
    """Where entries go (None: no caching). The app calls this before loading models."""
    global _root
    _root = Path(path) if path is not None else None


def root() -> Path | None:
    return _root


def key_of(*parts: object) -> str:
    """A short key for everything an entry derives from."""
    return hashlib.sha256("\0".join(map(str, parts)).encode()).hexdigest()[:16]


def file_sha256(path: Path) -> str:
    """The file's sha256, read afresh (a cache entry's files can be rewritten)."""
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def _manifest(folder: Path, key: str) -> dict[str, object]:
    files: dict[str, dict[str, object]] = {}
    for path in sorted(folder.iterdir()):
        size = path.stat().st_size
        files[path.name] = {
            "size": size,
            **({"sha256": file_sha256(path)} if size <= CHECKSUM_LIMIT else {}),
        }
    return {"key": key, "files": files}


def _intact(folder: Path, key: str) -> bool:
    try:
        manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
        if manifest.get("key") != key:
            return False
        for name, expected in manifest["files"].items():
            path = folder / name
            if path.stat().st_size != expected["size"]:
                return False
            if "sha256" in expected and file_sha256(path) != expected["sha256"]:
                return False
        return True
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return False


def cached(
    name: str,
    key: str,
    build: Callable[[], T],
    write: Callable[[T, Path], None],
    read: Callable[[Path], T],
    *,
    root_dir: Path | None = None,
) -> T:
    """``read`` of entry ``name``/``key`` when it is intact, else ``build()``, written by
    ``write`` (into an empty folder) for the next start. ``read`` gets the entry's folder;
    what it returns may keep files of it mapped (the folder is never changed in place)."""
    base = root_dir if root_dir is not None else _root
    if base is None:
        return build()
    folder = base / f"{name}-{key}"
    if folder.is_dir():
        if _intact(folder, key):
            try:
                return read(folder)
            except Exception as exc:  # any unreadable entry is rebuilt
                log.warning("model cache %s unreadable (%s): rebuilding it", folder, exc)
        else:
            log.warning("model cache %s is damaged: rebuilding it", folder)
        shutil.rmtree(folder, ignore_errors=True)
    value = build()
    try:
        base.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=base))
        try:
            write(value, staging)
            manifest = _manifest(staging, key)
            (staging / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
            try:
                os.rename(staging, folder)
            except OSError:
                if not folder.is_dir():
                    raise
                shutil.rmtree(staging, ignore_errors=True)  # another process wrote it first
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        for old in base.glob(f"{name}-*"):
            if old != folder and old.is_dir():
                shutil.rmtree(old, ignore_errors=True)
    except Exception as exc:  # a full disk, or state a new package version cannot store
        log.warning("could not cache %s in %s (%s): it is rebuilt at every start", name, base, exc)
    return value
