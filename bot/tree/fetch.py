"""Real vLLM trees from the source distributions on the package index, cached per version.

A release's sdist holds the whole repository (tests/ and docs/ included), but pip cannot build
its metadata here. ``pip download --no-clean`` with our own TMPDIR keeps the unpacked tree
before that step fails; we take it from there. Each cached tree is made a git repository with
one deterministic commit, because later stages branch and commit on it.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

from bot.config import cache_dir
from bot.errors import BotError
from bot.fileio import held_lock
from bot.gitrepo import Repo
from bot.subprocess_env import run_build_step, scratch_home

_VERSION = re.compile(r"^\d+\.\d+\.\d+(?:(?:rc|a|b|\.post|\.dev)\d+)?$")
_READY_MARKER = "bot-tree-ready"
_COMMIT_DATE = "2000-01-01T00:00:00+00:00"


def trees_dir() -> Path:
    return cache_dir() / "vllm-trees"


def release_tree(version: str) -> Path:
    """The cached git checkout of vLLM ``version``; downloads it on first use only."""
    if not _VERSION.match(version):
        raise BotError(f"not a vLLM release version: {version!r} (expected e.g. 0.23.0)")
    root = trees_dir()
    root.mkdir(parents=True, exist_ok=True)
    dest = root / version
    if (dest / ".git" / _READY_MARKER).exists():
        return dest
    with held_lock(root / f".{version}.lock"):
        if (dest / ".git" / _READY_MARKER).exists():
            return dest
        if dest.exists():
            shutil.rmtree(dest)  # a half-made tree from an interrupted run
        with tempfile.TemporaryDirectory(dir=root, prefix=f".{version}-") as scratch:
            unpacked = _download_sdist(version, Path(scratch))
            _commit_tree(unpacked, version)
            (unpacked / ".git" / _READY_MARKER).write_text(version + "\n")
            os.replace(unpacked, dest)
    return dest


def _download_sdist(version: str, scratch: Path) -> Path:
    pip_tmp = scratch / "pip-tmp"
    pip_tmp.mkdir()
    command = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--no-binary",
        ":all:",
        "--no-build-isolation",
        "--no-clean",
        "--disable-pip-version-check",
        "-d",
        str(scratch / "dl"),
        f"vllm=={version}",
    ]
    # pip is expected to fail at "preparing metadata" (which runs the release's setup.py, in
    # the sandbox); the unpacked tree is what we want.
    with scratch_home() as home:
        process = run_build_step(
            command,
            extra={"TMPDIR": str(pip_tmp), **_proxy_settings()},
            writable=[scratch],
            home=home,
        )
        output, _ = process.communicate()
    for candidate in sorted(pip_tmp.glob("pip-download-*/vllm*")):
        if (candidate / "vllm" / "__init__.py").is_file():
            return candidate
    tail = (output or "").strip().splitlines()[-1:] or ["no output"]
    raise BotError(f"could not download the vLLM {version} source distribution: {tail[0]}")


def _proxy_settings() -> dict[str, str]:
    """pip needs the proxy to reach the package index (kept out of every other subprocess)."""
    names = ("HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY", "https_proxy", "http_proxy", "no_proxy")
    return {name: os.environ[name] for name in names if name in os.environ}


def _commit_tree(path: Path, version: str) -> None:
    repo = Repo.init(path, initial_branch="main")
    repo.git.add("--all", "--force", ".")
    env = {
        "GIT_AUTHOR_NAME": "vLLM release",
        "GIT_AUTHOR_EMAIL": "release@invalid",
        "GIT_AUTHOR_DATE": _COMMIT_DATE,
        "GIT_COMMITTER_NAME": "vLLM release",
        "GIT_COMMITTER_EMAIL": "release@invalid",
        "GIT_COMMITTER_DATE": _COMMIT_DATE,
    }
    repo.git.commit("--quiet", "--no-verify", "--no-gpg-sign", "-m", f"vLLM {version}", env=env)
    repo.close()
