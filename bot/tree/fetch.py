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
from bot.github.gitrepo import Repo
from bot.subprocess_env import build_step
from bot.untrusted_files import copy_as_data

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
    # the sandbox); the unpacked tree is what we want. Whatever that step left there is data:
    # the tree is copied out file by file (no link, no .git), and git only ever runs on the
    # copy, which no sandboxed code has seen.
    with build_step(command, extra={"TMPDIR": str(pip_tmp)}, writable=[scratch]) as process:
        output, _ = process.communicate()
    for candidate in _unpacked(pip_tmp):
        tree = scratch / "tree"
        copy_as_data(candidate, tree)
        return tree
    tail = (output or "").strip().splitlines()[-1:] or ["no output"]
    raise BotError(f"could not download the vLLM {version} source distribution: {tail[0]}")


def _unpacked(pip_tmp: Path) -> list[Path]:
    """pip's unpacked ``pip-download-*/vllm*`` trees, reached through no link on the way."""
    found = []
    for download in _real_dirs(pip_tmp, "pip-download-"):
        found += [c for c in _real_dirs(download, "vllm") if _is_file(c / "vllm" / "__init__.py")]
    return found


def _real_dirs(parent: Path, prefix: str) -> list[Path]:
    if parent.is_symlink() or not parent.is_dir():
        return []
    return sorted(p for p in parent.iterdir() if p.name.startswith(prefix) and _real_dir(p))


def _real_dir(path: Path) -> bool:
    return path.is_dir() and not path.is_symlink()


def _is_file(path: Path) -> bool:
    return _real_dir(path.parent) and path.is_file() and not path.is_symlink()


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
