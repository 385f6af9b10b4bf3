"""Per-file facts cached by content hash, in one pickle per kind under the user cache dir.

Whatever is derived from a file's text alone (class facts, error signatures) is keyed by the
hash of that text, so a second run over an unchanged tree — or over a release that shares most
files with one already seen — parses nothing.
"""

from __future__ import annotations

import contextlib
import hashlib
import pickle
import sys
from pathlib import Path
from typing import Any

from bot.config import cache_dir
from bot.fileio import write_atomic


def content_key(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def cache_file(kind: str, version: int) -> Path:
    tag = f"v{version}-py{sys.version_info.major}{sys.version_info.minor}"
    return cache_dir() / "index" / f"{kind}-{tag}.pickle"


def load(path: Path) -> dict[str, Any]:
    # Our own file in the user's cache directory; a damaged one is just rebuilt.
    try:
        with path.open("rb") as handle:
            data = pickle.load(handle)
        return data if isinstance(data, dict) else {}
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ValueError):
        return {}


def save(path: Path, cache: dict[str, Any]) -> None:
    with contextlib.suppress(OSError):  # a cache we cannot write only costs time
        write_atomic(path, pickle.dumps(cache, protocol=pickle.HIGHEST_PROTOCOL))
