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

* no capability and not the caller's uid: run by an ordinary user, ``bwrap`` makes a user
  namespace, maps the caller to :data:`SANDBOX_UID` in it, drops every capability and forbids
  further user namespaces; run by root (``./dev``, CI, many runners), where a user namespace
  would keep root's uid and capabilities, ``bwrap`` makes the other namespaces and ``setpriv``
  (util-linux) then becomes :data:`SANDBOX_UID` for real, with no capability, no bounding set and
  ``no_new_privs``, so the code cannot unmount what hides HOME, remount ``/`` read-write, or read a
  root-only file. What the step may write is handed to that uid for the step
  (:func:`handed_over`) and taken back afterwards;
* the working directory is read-only unless the step lists it as writable: a test run in a tree
  cannot plant a ``.git`` or ``.gitattributes`` there for the git the bot runs on it next.

Where namespaces are forbidden (some containers), ``bwrap`` is missing or, as root, ``setpriv``
cannot drop to the sandbox's uid, a run refuses with one line, unless the operator opts out
explicitly with ``BOT_SANDBOX=off``.
"""

from __future__ import annotations

import contextlib
import functools
import glob
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from bot.config import cache_dir, home_dir
from bot.errors import BotError

# NVIDIA's device nodes, and the DRM render nodes and KFD that ROCm uses.
GPU_DEVICE_PATTERNS = ("/dev/nvidia*", "/dev/dri", "/dev/kfd")
OPT_OUT = "BOT_SANDBOX"  # "off": run upstream code without the sandbox (explicit, documented)
# Always replaced by an empty directory inside the sandbox (besides the real home directories);
# the scratch ones are writable by anyone, like the real ones.
_HIDDEN = ("/tmp", "/var/tmp", "/run", "/var/run", "/dev/shm")
_SCRATCH = frozenset({"/tmp", "/var/tmp", "/dev/shm"})
# The uid (and gid) upstream code runs as: the overflow id, which owns no file of the machine.
SANDBOX_UID = 65534


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

    ``home`` and ``writable`` are bound writable (each must be a directory, not a link: a link
    there could only have been planted), ``cwd`` (unless listed in ``writable``), ``readable``
    and the interpreter ``command[0]`` needs read-only, everything else as described in the
    module docstring. As root, run it inside :func:`handed_over` for ``home`` and ``writable``."""
    if disabled():
        return list(command)
    bwrap, setpriv = _tools()
    writable_dirs = {Path(p) for p in (home, *writable)}
    for path in writable_dirs:
        _refuse_link(path)
    hidden = {*_HIDDEN, *hidden_homes, str(cache_dir()), str(home_dir())}
    mounts: list[tuple[str, str]] = [(_real(Path(p)), "--tmpfs") for p in hidden if _is_dir(p)]
    read_only = {*map(Path, readable), *interpreter_roots(command[0])}
    if Path(cwd) not in writable_dirs:
        read_only.add(Path(cwd))
    mounts += [(_real(p), "--ro-bind") for p in read_only if p.exists()]
    mounts += [(_real(p), "--bind") for p in writable_dirs if p.exists()]
    args = [
        bwrap,
        *_namespaces(network),
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
    # bwrap makes a missing parent of a mount point private to root (0700), which the sandbox's
    # uid could not enter: the parents inside an empty directory are made first, open to all.
    tmpfs = [path for path, kind in mounts if kind == "--tmpfs"]
    mounts += [(parent, "--dir") for path, _ in mounts for parent in _parents_in(path, tmpfs)]
    # Parents before children, an empty directory before what is bound back into it.
    order = {"--tmpfs": 0, "--dir": 1, "--ro-bind": 2, "--bind": 3}
    for path, kind in sorted(set(mounts), key=lambda m: (m[0].count("/"), m[0], order[m[1]])):
        if kind == "--tmpfs":
            args += ["--perms", "1777" if path in _SCRATCH else "0755", kind, path]
        elif kind == "--dir":
            args += ["--perms", "0755", kind, path]
        else:
            args += [kind, path, path]
    return [*args, "--chdir", _real(cwd), "--", *_drop_to_sandbox_uid(setpriv), *command]


def _parents_in(path: str, tmpfs: list[str]) -> list[str]:
    """The ancestors of ``path`` that lie strictly inside one of the ``tmpfs`` directories."""
    parents = []
    parent = os.path.dirname(path)
    while parent not in ("/", "") and parent != path:
        if any(parent.startswith(root + "/") for root in tmpfs):
            parents.append(parent)
        path, parent = parent, os.path.dirname(parent)
    return parents


def _namespaces(network: bool) -> list[str]:
    if _as_root():
        # No user namespace: in one, root keeps uid 0 and every capability over its mounts.
        return [
            "--unshare-ipc",
            "--unshare-pid",
            "--unshare-uts",
            "--unshare-cgroup-try",
            *([] if network else ["--unshare-net"]),
        ]
    return [
        "--unshare-all",
        *(["--share-net"] if network else []),
        "--unshare-user",
        "--uid",
        str(SANDBOX_UID),
        "--gid",
        str(SANDBOX_UID),
        "--disable-userns",
        "--cap-drop",
        "ALL",
    ]


def _drop_to_sandbox_uid(setpriv: str | None) -> list[str]:
    """As root: become the sandbox's uid for real, keeping no capability at all."""
    if setpriv is None:
        return []
    uid = str(SANDBOX_UID)
    return [
        setpriv,
        f"--reuid={uid}",
        f"--regid={uid}",
        "--clear-groups",
        "--inh-caps=-all",
        "--ambient-caps=-all",
        "--bounding-set=-all",
        "--no-new-privs",
        "--",
    ]


@contextlib.contextmanager
def handed_over(paths: Iterable[Path]) -> Iterator[None]:
    """As root, the sandbox's uid owns ``paths`` (directories, and what is in them) while the
    block runs; root takes them back afterwards. Nothing to do for another caller, whose own
    uid the sandbox runs as. A regular file with more than one link is never handed over or
    taken back: it could be a hard link to a file elsewhere."""
    if disabled() or not _as_root():
        yield
        return
    roots = [Path(p) for p in paths]
    _chown_tree(roots, SANDBOX_UID)
    try:
        yield
    finally:
        _chown_tree(roots, os.geteuid(), os.getegid())


def _chown_tree(roots: list[Path], uid: int, gid: int | None = None) -> None:
    gid = uid if gid is None else gid
    for root in roots:
        if not root.is_dir() or root.is_symlink():
            continue
        os.chown(root, uid, gid, follow_symlinks=False)
        for _folder, dirs, files, dir_fd in os.fwalk(root, follow_symlinks=False):
            for name in (*dirs, *files):
                with contextlib.suppress(OSError):
                    info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
                    if stat.S_ISREG(info.st_mode) and info.st_nlink > 1:
                        continue
                    os.chown(name, uid, gid, dir_fd=dir_fd, follow_symlinks=False)


def _refuse_link(path: Path) -> None:
    if path.is_symlink():
        raise BotError(f"refusing to let upstream code write through the link {path}")


def _as_root() -> bool:
    return os.geteuid() == 0


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


def usable() -> None:
    """Nothing when upstream code can run here (the sandbox works, or is off on purpose); else
    the one-line BotError that says why not and what to do."""
    if not disabled():
        _tools()


def _tools() -> tuple[str, str | None]:
    """``bwrap``, and as root ``setpriv``; BotError when they cannot make the sandbox here."""
    found = _probe(_as_root())
    if isinstance(found, BotError):
        raise found
    return found


@functools.cache
def _probe(as_root: bool) -> tuple[str, str | None] | BotError:
    """The tools to use, once they have shown that they can make the sandbox here."""
    bwrap = shutil.which("bwrap")
    setpriv = shutil.which("setpriv") if as_root else None
    if not bwrap:
        why = "bubblewrap (bwrap) is not installed"
    elif as_root and not setpriv:
        why = "setpriv (util-linux), which drops root to the sandbox's uid, is not installed"
    else:
        command = [bwrap, *_namespaces(False), "--ro-bind", "/", "/", "--proc", "/proc", "--"]
        command += [*_drop_to_sandbox_uid(setpriv), "true"]
        try:
            probe = subprocess.run(
                command,
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
                return bwrap, setpriv
            lines = probe.stderr.strip().splitlines() or ["no output"]
            why = f"bwrap cannot make the sandbox here ({lines[-1][:120]})"
    return BotError(
        f"upstream code runs only inside a sandbox and {why}; install bubblewrap and allow "
        f"user namespaces (docs/github-action.md), or set {OPT_OUT}=off to run it unsandboxed"
    )


def _is_dir(path: str) -> bool:
    return os.path.isdir(path) and os.path.realpath(path) != "/"


def _real(path: Path) -> str:
    return os.path.realpath(path)
