"""The environment every subprocess the bot starts gets: an allow-list, never a copy of ours.

A subprocess may run upstream code (pytest, ``import vllm``, ruff's config, git hooks), so it must
not see credentials or the Actions runner's command files (``GITHUB_TOKEN``, ``GITHUB_ENV``,
``GITHUB_OUTPUT``, ``ACTIONS_*``). Only what locating programs, certificates, locale, temporary
files, the package index and the bot's own caches need is passed on.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

_KEEP = frozenset(
    {
        "PATH",
        "HOME",
        "USER",
        "LOGNAME",
        "SHELL",
        "TERM",
        "LANG",
        "LANGUAGE",
        "TZ",
        "TMPDIR",
        "TEMP",
        "TMP",
        "SSL_CERT_FILE",
        "SSL_CERT_DIR",
        "REQUESTS_CA_BUNDLE",
        "CURL_CA_BUNDLE",
        "GIT_SSL_CAINFO",
        "OPENBLAS_CORETYPE",
        "OPENBLAS_L2_SIZE",
        "PYTHONDONTWRITEBYTECODE",
        "PYTHONUNBUFFERED",
        "BOT_CACHE_DIR",
        "BOT_HOME",
    }
)
_KEEP_PREFIXES = ("LC_", "PIP_", "XDG_")
# Never passed on, even if a prefix above would admit them.
_SECRET_MARKERS = ("TOKEN", "SECRET", "PASSWORD", "CREDENTIAL", "_KEY")


def minimal_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The allow-listed part of ``os.environ``, plus ``extra`` (which the caller vouches for)."""
    env = {
        name: value
        for name, value in os.environ.items()
        if (name in _KEEP or name.startswith(_KEEP_PREFIXES))
        and not any(marker in name.upper() for marker in _SECRET_MARKERS)
    }
    if extra:
        env.update(extra)
    return env
