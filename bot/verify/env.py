"""A Python environment per vLLM release in which the release's own source tree imports.

The release's wheel declares its dependencies from ``requirements/cuda.txt`` (which pulls in
``common.txt``); we read them from the release's source tree. On a CPU machine:

- the platform-independent part (``common.txt``, plus ``numba``) is installed from the package
  index; a requirement the index cannot serve is skipped and listed, not fatal;
- the torch family is replaced by the machine's CPU torch (``BOT_ENV_TORCH``), except that the
  release's torchvision and the test lock's timm go in without their dependencies: the index's
  torchvision is a CUDA build whose compiled ops cannot load against a CPU torch, but its Python
  part is what vLLM's multimodal model files import (``bot_torchvision_ops`` lets it import
  without the ops; torchaudio's import needs its compiled library, so it stays out);
- the rest of ``cuda.txt`` (flashinfer, CUTLASS, CUDA kernels) is GPU-only: skipped and listed.

vLLM itself is never installed: the tree under test goes first on ``sys.path``. Each environment
is a venv under ``BOT_CACHE_DIR/vllm-envs/<version>``, built once under a lock; the manifest that
marks it ready is written last, so an interrupted build leaves nothing marked ready.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from bot.config import cache_dir
from bot.errors import BotError
from bot.fileio import held_lock
from bot.subprocess_env import build_step
from bot.tree.fetch import release_tree
from bot.untrusted_files import read_regular, write_inside

MANIFEST = "bot-env.json"
_VERSION = re.compile(r"^\d+\.\d+\.\d+(?:(?:rc|a|b|\.post|\.dev)\d+)?$")
_TORCH_FAMILY = frozenset({"torch", "torchaudio", "torchvision", "torchcodec"})
# Installed with --no-deps (their dependencies would pull a CUDA torch): the tree's pin of these
# torch-family packages, and these packages pinned as the release's test lock pins them.
_PYTHON_ONLY_TORCH_FAMILY = frozenset({"torchvision"})
_PYTHON_ONLY_TEST_REQUIREMENTS = ("timm",)
TORCHVISION_OPS = "bot_torchvision_ops"
_TORCH_FAMILY_SKIP = (
    "torch family: the index's build needs a CUDA torch; the machine's CPU torch is used"
)
# Not in common.txt but needed by vLLM on every platform (the n-gram proposer imports it).
_PORTABLE_EXTRAS = frozenset({"numba"})
# What the release's CPU tests need beyond its own requirements (its tests/conftest.py imports
# tblib); pinned as the release's test lock file pins them.
TEST_REQUIREMENTS = ("pytest", "pytest-asyncio", "tblib")
_TEST_LOCKS = ("test/cpu.txt", "test/cuda.txt")
DEFAULT_TORCH = "torch==2.13.0"
_UNRESOLVED = re.compile(
    r"(?:No matching distribution found for|"
    r"Could not find a version that satisfies the requirement)\s+([A-Za-z0-9][A-Za-z0-9._-]*)"
)
_MAX_SKIPS = 12
_INSTALL_TIMEOUT = 3600.0


@dataclass(frozen=True)
class Skipped:
    requirement: str
    reason: str


@dataclass(frozen=True)
class RequirementSet:
    install: tuple[str, ...]
    skipped: tuple[Skipped, ...]
    python_only: tuple[str, ...] = ()  # installed without their dependencies


@dataclass
class EnvInfo:
    version: str
    path: Path
    python: Path
    wanted: list[str] = field(default_factory=list)  # what it was built from
    installed: list[str] = field(default_factory=list)
    wanted_python_only: list[str] = field(default_factory=list)  # what went in with --no-deps
    python_only: list[str] = field(default_factory=list)  # of those, what was installed
    skipped: list[Skipped] = field(default_factory=list)
    seconds: float = 0.0
    size_bytes: int = 0
    built_now: bool = False

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["path"] = str(self.path)
        data["python"] = str(self.python)
        data.pop("built_now")
        return data


Progress = Callable[[str], None]


def envs_dir() -> Path:
    return cache_dir() / "vllm-envs"


def torch_requirement() -> str:
    return os.environ.get("BOT_ENV_TORCH") or DEFAULT_TORCH


def read_requirements(tree: Path) -> RequirementSet:
    """What the release's wheel declares, split into what a CPU environment installs and skips."""
    requirements_dir = tree / "requirements"
    declared = _read_file(requirements_dir, "cuda.txt", set())
    common = {canonicalize_name(r.name) for r in _read_file(requirements_dir, "common.txt", set())}
    install: list[str] = []
    skipped: list[Skipped] = []
    python_only: list[str] = []
    torch_added = False
    for req in declared:
        name = canonicalize_name(req.name)
        if req.marker is not None and not req.marker.evaluate():
            continue
        if req.url:  # `name @ https://...` or `file:///...`: never fetched from the tree's word
            skipped.append(Skipped(str(req), "not from the package index (a URL or local path)"))
            continue
        if name in _TORCH_FAMILY:
            if not torch_added:
                install.append(torch_requirement())
                torch_added = True
            if name in _PYTHON_ONLY_TORCH_FAMILY:
                python_only.append(str(req))
            elif name != "torch":
                skipped.append(Skipped(str(req), _TORCH_FAMILY_SKIP))
            continue
        if name in common or name in _PORTABLE_EXTRAS:
            install.append(str(req))
        else:
            skipped.append(Skipped(str(req), "GPU-only (requirements/cuda.txt)"))
    if not torch_added:
        install.append(torch_requirement())
    install.extend(_test_requirements(requirements_dir, TEST_REQUIREMENTS))
    if python_only:
        python_only.extend(_test_requirements(requirements_dir, _PYTHON_ONLY_TEST_REQUIREMENTS))
    return RequirementSet(tuple(install), tuple(skipped), tuple(python_only))


def _test_requirements(requirements_dir: Path, names: tuple[str, ...]) -> list[str]:
    pins: dict[str, str] = {}
    for lock in _TEST_LOCKS:
        path = requirements_dir / lock
        if not path.is_file():
            continue
        for line in path.read_text(encoding="utf-8").splitlines():
            match = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s\\;#]+)", line)
            if match:
                pins.setdefault(canonicalize_name(match.group(1)), match.group(0))
        break
    return [pins.get(canonicalize_name(name), name) for name in names]


def _read_file(directory: Path, name: str, seen: set[str]) -> list[Requirement]:
    path = directory / name
    if name in seen or not path.is_file():
        if name in seen:
            return []
        raise BotError(f"the vLLM tree has no requirements/{name}")
    seen.add(name)
    result: list[Requirement] = []
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("-r "):
            result.extend(_read_file(directory, _inside(directory, line.split()[1]), seen))
            continue
        if line.startswith("-"):
            continue  # index options: the machine's pip configuration decides
        try:
            result.append(Requirement(line))
        except InvalidRequirement:
            continue
    return result


def _inside(directory: Path, name: str) -> str:
    """``name`` (an ``-r`` include) if it stays inside the tree, else a BotError."""
    tree = directory.parent.resolve()
    if not (directory / name).resolve().is_relative_to(tree):
        raise BotError(f"requirements/ includes {name[:80]!r}, outside the vLLM tree; refusing it")
    return name


def vllm_env(version: str, progress: Progress | None = None) -> EnvInfo:
    """The ready environment for vLLM ``version``; built (once, under a lock) if missing."""
    if not _VERSION.match(version):
        raise BotError(f"not a vLLM release version: {version!r} (expected e.g. 0.23.0)")
    say = progress or (lambda _line: None)
    root = envs_dir()
    root.mkdir(parents=True, exist_ok=True)
    dest = root / version
    wanted = read_requirements(release_tree(version))
    ready = read_manifest(dest)
    if ready is not None and _is_current(ready, wanted):
        return ready
    with build_lock(root, version):
        ready = read_manifest(dest)
        if ready is not None and _is_current(ready, wanted):
            return ready
        if ready is not None:
            say(f"the vLLM {version} environment needs other packages now: installing them")
            return write_manifest(_top_up(ready, wanted, say))
        if dest.exists():
            say(f"removing the unfinished environment at {dest}")
            shutil.rmtree(dest)
        try:
            info = _build(version, dest, wanted, say)
        except BaseException:
            shutil.rmtree(dest, ignore_errors=True)
            raise
    return info


def _is_current(info: EnvInfo, wanted: RequirementSet) -> bool:
    return (
        info.wanted == list(wanted.install)
        and info.wanted_python_only == list(wanted.python_only)
        and _torchvision_ops_current(info)
    )


@contextlib.contextmanager
def build_lock(root: Path, name: str) -> Iterator[None]:
    """Held while the environment ``name`` under ``root`` is built: one builder at a time,
    across processes (another caller waits, then finds it ready)."""
    with held_lock(root / f".{name}.lock"):
        yield


def existing_env(version: str) -> EnvInfo | None:
    """The environment for ``version`` if it is built and ready; never builds."""
    if not _VERSION.match(version):
        return None
    return read_manifest(envs_dir() / version)


def read_manifest(dest: Path) -> EnvInfo | None:
    try:
        data = json.loads(read_regular(dest / MANIFEST, 1 << 20))
        return EnvInfo(
            version=str(data["version"]),
            path=dest,
            python=dest / "bin" / "python",
            wanted=[str(r) for r in data.get("wanted", [])],
            installed=[str(r) for r in data["installed"]],
            wanted_python_only=[str(r) for r in data.get("wanted_python_only", [])],
            python_only=[str(r) for r in data.get("python_only", [])],
            skipped=[Skipped(str(s["requirement"]), str(s["reason"])) for s in data["skipped"]],
            seconds=float(data["seconds"]),
            size_bytes=int(data["size_bytes"]),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _build(version: str, dest: Path, wanted: RequirementSet, say: Progress) -> EnvInfo:
    started = time.monotonic()
    say(f"building the vLLM {version} environment in {dest}")
    for item in wanted.skipped:
        say(f"  skipping {item.requirement}: {item.reason}")
    dest.mkdir(parents=True)
    run_logged([sys.executable, "-m", "venv", str(dest)], say, timeout=600, dest=dest)
    python = dest / "bin" / "python"
    installed, unresolved = _install(python, list(wanted.install), say)
    python_only, python_only_unresolved = _install_python_only(python, wanted.python_only, say)
    info = EnvInfo(
        version=version,
        path=dest,
        python=python,
        wanted=list(wanted.install),
        installed=installed,
        wanted_python_only=list(wanted.python_only),
        python_only=python_only,
        skipped=[*wanted.skipped, *unresolved, *python_only_unresolved],
        seconds=round(time.monotonic() - started, 1),
        size_bytes=dir_size(dest),
        built_now=True,
    )
    write_manifest(info)
    say(f"vLLM {version} environment ready: {info.size_bytes / 2**30:.1f} GiB, {info.seconds:.0f}s")
    return info


def _top_up(info: EnvInfo, wanted: RequirementSet, say: Progress) -> EnvInfo:
    """Install what the requirements gained since the environment was built."""
    started = time.monotonic()
    new = [r for r in wanted.install if r not in info.installed]
    installed, unresolved = _install(info.python, new, say) if new else ([], [])
    python_only, python_only_unresolved = _install_python_only(info.python, wanted.python_only, say)
    info.wanted = list(wanted.install)
    info.installed = [r for r in wanted.install if r in info.installed or r in installed]
    info.wanted_python_only = list(wanted.python_only)
    info.python_only = python_only
    info.skipped = [*wanted.skipped, *unresolved, *python_only_unresolved]
    info.seconds = round(info.seconds + time.monotonic() - started, 1)
    info.size_bytes = dir_size(info.path)
    info.built_now = True
    return info


def write_manifest(info: EnvInfo) -> EnvInfo:
    manifest = json.dumps(info.to_json(), indent=2, sort_keys=True) + "\n"
    # The build steps wrote in this directory: never through a link they left (write_inside).
    _write_into(info.path, MANIFEST, manifest)  # the environment is ready from this moment on
    return info


def _write_into(env: Path, relative: str, text: str) -> None:
    try:
        write_inside(env, relative, text)
    except OSError as exc:
        raise BotError(f"could not write {relative} into {env}: {exc.strerror or exc}") from None


def _install_python_only(
    python: Path, wanted: tuple[str, ...], say: Progress
) -> tuple[list[str], list[Skipped]]:
    """pip install ``wanted`` --no-deps; with torchvision, its ops stand-in goes in too."""
    installed, skipped = _install(python, list(wanted), say, no_deps=True) if wanted else ([], [])
    if any(_name(r) == "torchvision" for r in installed):
        _write_torchvision_ops(python)
    return installed, skipped


def _torchvision_ops_source() -> str:
    return resources.files("bot.verify.harness").joinpath(f"{TORCHVISION_OPS}.py").read_text()


def _site_packages(python: Path) -> str:
    """``lib/python3.X/site-packages`` of the environment, relative to it."""
    env = python.parent.parent
    found = sorted(env.glob("lib/python3*/site-packages"))
    if len(found) != 1:
        raise BotError(f"the environment at {env} has no single site-packages")
    return found[0].relative_to(env).as_posix()


def _write_torchvision_ops(python: Path) -> None:
    env, site = python.parent.parent, _site_packages(python)
    _write_into(env, f"{site}/{TORCHVISION_OPS}.py", _torchvision_ops_source())
    hook = f"import {TORCHVISION_OPS}; {TORCHVISION_OPS}.install()\n"
    _write_into(env, f"{site}/{TORCHVISION_OPS}.pth", hook)


def _torchvision_ops_current(info: EnvInfo) -> bool:
    """True unless torchvision went in and its ops stand-in is missing or out of date."""
    if not any(_name(r) == "torchvision" for r in info.python_only):
        return True
    try:
        site = info.path / _site_packages(info.python)
        installed = read_regular(site / f"{TORCHVISION_OPS}.py", 1 << 20).decode()
    except (OSError, BotError, UnicodeDecodeError):
        return False
    return installed == _torchvision_ops_source()


def _install(
    python: Path, wanted: list[str], say: Progress, *, no_deps: bool = False
) -> tuple[list[str], list[Skipped]]:
    """pip install ``wanted``; a requirement the index cannot serve is dropped and listed."""
    skipped: list[Skipped] = []
    for _ in range(_MAX_SKIPS):
        options = ["--no-deps"] if no_deps else []
        command = [str(python), "-m", "pip", "install", "--progress-bar", "off", *options, *wanted]
        code, tail = run_logged(command, say, timeout=_INSTALL_TIMEOUT, dest=python.parent.parent)
        if code == 0:
            return wanted, skipped
        missing = _UNRESOLVED.search(tail)
        name = canonicalize_name(missing.group(1)) if missing else None
        culprit = next((r for r in wanted if _name(r) == name), None)
        if culprit is None or _name(culprit) == "torch":
            raise BotError(f"pip could not install the environment: {last_line(tail)}")
        say(f"  the package index does not serve {culprit}: skipped")
        skipped.append(Skipped(culprit, "the package index serves no matching distribution"))
        wanted = [r for r in wanted if r != culprit]
    raise BotError(f"pip could not install the environment after {_MAX_SKIPS} skips")


def _name(requirement: str) -> str:
    try:
        return canonicalize_name(Requirement(requirement).name)
    except InvalidRequirement:
        return requirement


def run_logged(command: list[str], say: Progress, *, timeout: float, dest: Path) -> tuple[int, str]:
    """Run a build step in the sandbox (network on, only ``dest`` writable) with its output
    streamed to ``say`` (pip's milestones only); exit code and output tail."""
    with build_step(
        command, extra={"PIP_DISABLE_PIP_VERSION_CHECK": "1"}, writable=[dest]
    ) as process:
        deadline = time.monotonic() + timeout
        lines: list[str] = []
        assert process.stdout is not None
        for line in process.stdout:
            line = line.rstrip()
            lines.append(line)
            del lines[:-200]
            if line.startswith(("Collecting ", "Installing collected", "Successfully", "ERROR")):
                say("  " + line[:160])
            if time.monotonic() > deadline:
                process.kill()
                raise BotError(f"{Path(command[0]).name} did not finish in {timeout:g}s")
        code = process.wait()
    return code, "\n".join(lines)


def last_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip() and "WARNING" not in line]
    return (lines[-1] if lines else "no output")[:300]


def dir_size(path: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(root, name)).st_size
    return total
