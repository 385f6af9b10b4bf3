"""The engine with a core plan's patch applied: evidence for a fix in vLLM's core.

A model plan's files are registered over the engine's classes one by one
(:mod:`bot.verify.engine`); a core fix (the drafter loaders, the interface's defaults) is
imported by the engine itself, before and around every model. So the engine runs it from a
copy of its own ``vllm`` package: a tree of symlinks to the installed files, the files the core
patch touches copied and patched, put first on ``PYTHONPATH``. The installed environment is
never written to; the patch must apply to the engine's own files (a plan made on the engine's
release: the fix class read from that release's tree).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from bot.errors import BotError
from bot.subprocess_env import minimal_env

if TYPE_CHECKING:
    from bot.verify.engine_env import Engine

PACKAGE = "vllm"


@dataclass(frozen=True)
class CoreOverlay:
    """The engine's package with a core patch: ``root`` goes first on ``PYTHONPATH``."""

    root: Path
    files: tuple[str, ...]  # what the patch changes, relative to the package's parent
    patch_sha256: str
    name: str  # what the record calls it (the core plan's recipe and class, or the patch file)

    def to_json(self) -> dict[str, object]:
        return {"name": self.name, "files": list(self.files), "patch_sha256": self.patch_sha256}


def installed_package(engine: Engine) -> Path:
    """The engine's installed ``vllm`` package directory."""
    lib = engine.env.python.parent.parent
    found = sorted(lib.glob(f"lib/python3*/site-packages/{PACKAGE}/__init__.py"))
    if len(found) != 1:
        raise BotError(f"the engine {engine.version} has no single installed vllm package")
    return found[0].parent


def core_overlay(engine: Engine, patch: str, dest: Path, name: str) -> CoreOverlay:
    """A copy of the engine's package at ``dest`` (symlinks) with ``patch`` applied to copies
    of the files it touches; refused when it touches anything outside the package or does not
    apply."""
    package = installed_package(engine)
    files = _touched(patch)
    dest.mkdir(parents=True, exist_ok=True)
    _mirror(package, dest / PACKAGE)
    for rel in files:
        link = dest / rel
        if not link.is_symlink():
            raise BotError(f"the core patch touches {rel}, which the engine's package lacks")
        target = link.resolve()
        link.unlink()
        shutil.copyfile(target, link)
    applied = subprocess.run(
        ["git", "apply", "--whitespace=nowarn", "-"],
        input=patch,
        text=True,
        cwd=dest,
        capture_output=True,
        env=minimal_env(),
        check=False,
    )
    if applied.returncode != 0:
        first = (applied.stderr.strip().splitlines() or ["git apply failed"])[0]
        raise BotError(f"the core patch does not apply to the engine's own files: {first}")
    digest = hashlib.sha256(patch.encode()).hexdigest()
    return CoreOverlay(dest, tuple(files), digest, name)


def _touched(patch: str) -> list[str]:
    files: list[str] = []
    for line in patch.splitlines():
        if line.startswith("+++ b/"):
            rel = line.removeprefix("+++ b/")
            parts = Path(rel).parts
            if not parts or parts[0] != PACKAGE or ".." in parts or not rel.endswith(".py"):
                raise BotError(f"the core patch touches {rel[:200]!r}: only .py files under vllm/")
            files.append(rel)
    if not files:
        raise BotError("the core patch changes no file")
    return files


def _mirror(source: Path, dest: Path) -> None:
    """``dest`` mirrors ``source``: real folders, a symlink for each file."""
    for folder, subfolders, names in os.walk(source):
        subfolders[:] = [d for d in subfolders if d != "__pycache__"]
        here = dest / Path(folder).relative_to(source)
        here.mkdir(parents=True, exist_ok=True)
        for name in names:
            link = here / name
            if not link.exists() and not link.is_symlink():
                link.symlink_to(Path(folder) / name)
