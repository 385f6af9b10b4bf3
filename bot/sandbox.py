"""A bubblewrap sandbox for every process that runs upstream code.

An allow-listed environment keeps secrets out of a child's variables, but a child running as the
same user can still read ``/proc/<pid>/environ`` of the shell that started the bot (and of any
other process of that user), the operator's ``~/.git-credentials`` and ``~/.netrc`` by absolute
path, talk to an ssh-agent socket, and rewrite the bot's own installed code, which the next run
with a token would execute. So upstream code (``import vllm``, pytest on a tree, the smoke
harness, the engine stage, pip building a release's requirements) runs under Debian's
``bubblewrap`` (``bwrap``):

* new user, PID, IPC, UTS, cgroup and mount namespaces, and a fresh ``/proc``: no other
  process is visible, so no other process's environment can be read;
* no network (a new network namespace), unless the step needs the package index;
* a minimal ``/dev``; a GPU test (``bot gpu-test``, ``bot verify --gpu local``) also gets the
  GPU device nodes (:data:`GPU_DEVICE_PATTERNS`), nothing else of the host's ``/dev``;
* the whole file system read-only, so the bot's installed files cannot be changed; the real
  home directories, the bot's own data and caches, ``/tmp``, ``/var/tmp`` and ``/run`` (agent
  sockets) replaced by empty directories; then only the paths the step needs are bound back,
  read-only (the tree, the interpreter) or writable (its work directory, a scratch ``HOME``).

Where namespaces are forbidden (some containers) or ``bwrap`` is missing, a run refuses with one
line, unless the operator opts out explicitly with ``BOT_SANDBOX=off``.
"""

from __future__ import annotations

import functools
import glob
import os
import shutil
import subprocess
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

from bot.config import cache_dir, home_dir
from bot.errors import BotError

# NVIDIA's device nodes, and the DRM render nodes and KFD that ROCm uses.
GPU_DEVICE_PATTERNS = ("/dev/nvidia*", "/dev/dri", "/dev/kfd")
OPT_OUT = "BOT_SANDBOX"  # "off": run upstream code without the sandbox (explicit, documented)
# Always replaced by an empty directory inside the sandbox (besides the real home directories).
_HIDDEN = ("/tmp", "/var/tmp", "/run", "/var/run", "/dev/shm")


def disabled() -> bool:
    return os.environ.get(OPT_OUT, "").strip().lower() == "off"


def sandboxed(
    command: Sequence[str],
    *,
    cwd: Path,
    home: Path,
    readable: Iterable[Path] = (),
    writable: Iterable[Path] = (),
    network: bool = False,
    hidden_homes: Iterable[str] = (),
    devices: Iterable[str] = (),
) -> list[str]:
    """``command`` wrapped in ``bwrap`` (or unchanged with ``BOT_SANDBOX=off``).

    ``cwd``, ``home`` and ``writable`` are bound writable, ``readable`` and the interpreter
    ``command[0]`` needs read-only, everything else as described in the module docstring."""
    if disabled():
        return list(command)
    bwrap = _bwrap()
    hidden = {*_HIDDEN, *hidden_homes, str(cache_dir()), str(home_dir())}
    mounts: list[tuple[str, str]] = [(_real(Path(p)), "--tmpfs") for p in hidden if _is_dir(p)]
    read_only = {*map(Path, readable), *interpreter_roots(command[0])}
    mounts += [(_real(p), "--ro-bind") for p in read_only if p.exists()]
    mounts += [(_real(p), "--bind") for p in {cwd, home, *writable} if p.exists()]
    args = [
        bwrap,
        "--unshare-all",
        *(["--share-net"] if network else []),
        "--die-with-parent",
        "--new-session",  # no TIOCSTI into the operator's terminal
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        *(arg for device in sorted(set(devices)) for arg in ("--dev-bind", device, device)),
        "--proc",
        "/proc",
    ]
    # Parents before children, an empty directory before what is bound back into it.
    order = {"--tmpfs": 0, "--ro-bind": 1, "--bind": 2}
    for path, kind in sorted(set(mounts), key=lambda m: (m[0].count("/"), m[0], order[m[1]])):
        args += [kind, path] if kind == "--tmpfs" else [kind, path, path]
    return [*args, "--chdir", _real(cwd), "--", *command]


def gpu_devices(patterns: Sequence[str] = GPU_DEVICE_PATTERNS) -> list[str]:
    """The host's GPU device nodes a GPU test needs (none on a machine without a GPU)."""
    return sorted({path for pattern in patterns for path in glob.glob(pattern)})


def interpreter_roots(program: str) -> set[Path]:
    """What running ``program`` needs to read when it is a Python: its venv, the installation
    the venv was made from (often under the home directory, e.g. pyenv's), and this process's
    own interpreter (``-m venv``, ``-m pip`` run with it)."""
    roots = {Path(sys.base_prefix), Path(sys.prefix)}
    path = Path(program)
    if path.is_absolute():
        roots.add(Path(os.path.realpath(path)).parent.parent)
        venv = path.parent.parent
        config = venv / "pyvenv.cfg"
        if config.is_file():
            roots.add(venv)
            for line in config.read_text(encoding="utf-8", errors="replace").splitlines():
                key, _, value = line.partition("=")
                if key.strip() == "home" and value.strip():
                    roots.add(Path(os.path.realpath(value.strip())).parent)
    return {root for root in roots if str(root) != "/"}


def _bwrap() -> str:
    found = _probe()
    if isinstance(found, BotError):
        raise found
    return found


@functools.cache
def _probe() -> str | BotError:
    """The ``bwrap`` to use, once it has shown it can make the namespaces here."""
    bwrap = shutil.which("bwrap")
    why = "bubblewrap (bwrap) is not installed"
    if bwrap:
        try:
            probe = subprocess.run(
                [bwrap, "--unshare-all", "--ro-bind", "/", "/", "--proc", "/proc", "true"],
                env={"PATH": os.defpath},
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            why = f"bwrap could not start ({type(exc).__name__})"
        else:
            if probe.returncode == 0:
                return bwrap
            lines = probe.stderr.strip().splitlines() or ["no output"]
            why = f"bwrap cannot make namespaces here ({lines[-1][:120]})"
    return BotError(
        f"upstream code runs only inside a sandbox and {why}; install Debian's bubblewrap and "
        f"allow user namespaces, or set {OPT_OUT}=off to run it unsandboxed"
    )


def _is_dir(path: str) -> bool:
    return os.path.isdir(path) and os.path.realpath(path) != "/"


def _real(path: Path) -> str:
    return os.path.realpath(path)
