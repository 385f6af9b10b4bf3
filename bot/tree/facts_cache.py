"""Per-file facts cached by content hash, in one pickle per kind under the user cache dir.

Whatever is derived from a file's text alone (class facts, error signatures) is keyed by the
hash of that text, so a second run over an unchanged tree — or over a release that shares most
files with one already seen — parses nothing.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import pickle
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bot.config import cache_dir
from bot.fileio import write_atomic

log = logging.getLogger(__name__)


def content_key(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def cache_file(kind: str, version: int) -> Path:
    tag = f"v{version}-py{sys.version_info.major}{sys.version_info.minor}"
    return cache_dir() / "index" / f"{kind}-{tag}.pickle"


class _PlainUnpickler(pickle.Unpickler):
    """Only plain data (dicts, lists, strings, numbers, tuples, sets): a cache file that names
    any class or function is refused, so a planted cache cannot run code."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"{module}.{name} is not plain data")


def load(path: Path, valid_entry: Callable[[Any], bool] | None = None) -> dict[str, Any]:
    """The cache at ``path``; a missing one is empty, a damaged one is reported and rebuilt
    (every entry is checked with ``valid_entry``; one bad entry discards the file)."""
    try:
        with path.open("rb") as handle:
            data = _PlainUnpickler(handle).load()
    except FileNotFoundError:
        return {}
    except Exception:  # noqa: BLE001 - whatever is wrong with our cache, it is only rebuilt
        return _corrupt(path)
    if not isinstance(data, dict) or not all(
        isinstance(key, str) and (valid_entry is None or valid_entry(value))
        for key, value in data.items()
    ):
        return _corrupt(path)
    return data


def _corrupt(path: Path) -> dict[str, Any]:
    log.warning("the cache %s was corrupt; it is rebuilt", path)
    with contextlib.suppress(OSError):
        path.unlink()
    return {}


def save(path: Path, cache: dict[str, Any]) -> None:
    with contextlib.suppress(OSError):  # a cache we cannot write only costs time
        write_atomic(path, pickle.dumps(cache, protocol=pickle.HIGHEST_PROTOCOL))
