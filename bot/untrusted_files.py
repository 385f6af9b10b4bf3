"""Reading, copying and writing where sandboxed code could write: never through its links.

What a sandboxed step leaves behind (a JUnit report, a harness's result, a venv it built, an
unpacked source distribution) is data. A step could have left a symbolic link where the bot
expects a file (``junit.xml -> ~/.git-credentials``), or a directory (``site-packages -> the
bot's own package``), a FIFO that blocks a reader, a ``.git`` whose configuration runs a filter.
So such files are read as regular files only (``O_NOFOLLOW``), copied file by file (links,
devices, sockets and ``.git`` left behind), and written into only through directories opened one
component at a time without following a link.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path, PurePosixPath

_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_DIR = os.O_RDONLY | os.O_NOFOLLOW | os.O_DIRECTORY | os.O_CLOEXEC
_CHUNK = 1 << 20


def read_regular(path: Path, limit: int) -> bytes:
    """At most ``limit`` bytes of ``path``; OSError unless it is a regular file (no link)."""
    fd = os.open(path, _READ)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path.name} is not a regular file")
        chunks, left = [], limit
        while left > 0 and (chunk := os.read(fd, min(left, _CHUNK))):
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def copy_regular(source: Path, dest: Path, limit: int) -> None:
    """Copy ``source`` (a regular file, no link) to ``dest``, a path the sandbox never had."""
    data = read_regular(source, limit + 1)
    if len(data) > limit:
        raise OSError(f"{source.name} is larger than {limit} bytes")
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    os.replace(tmp, dest)


def copy_as_data(source: Path, dest: Path, skip: frozenset[str] = frozenset({".git"})) -> int:
    """Copy the directories and regular files under ``source`` to ``dest`` (created); links,
    special files and any entry named in ``skip`` (at any depth) stay behind. Returns the
    number of files copied."""
    dest.mkdir(parents=True)
    copied = 0
    for folder, dirs, files, dir_fd in os.fwalk(source, follow_symlinks=False):
        target = dest / os.path.relpath(folder, source)
        dirs[:] = [d for d in dirs if d not in skip and _is(dir_fd, d, stat.S_ISDIR)]
        for name in dirs:
            (target / name).mkdir()
        for name in files:
            if name in skip:
                continue
            copied += _copy_one(dir_fd, name, target / name)
    return copied


def _is(dir_fd: int, name: str, kind: object) -> bool:
    try:
        mode = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
    except OSError:
        return False
    return bool(kind(mode))  # type: ignore[operator]


def _copy_one(dir_fd: int, name: str, dest: Path) -> int:
    try:
        fd = os.open(name, _READ, dir_fd=dir_fd)
    except OSError:  # a link (ELOOP), gone, unreadable
        return 0
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return 0
        mode = 0o755 if info.st_mode & 0o111 else 0o644
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        with os.fdopen(os.open(dest, flags, mode), "wb") as out:
            while chunk := os.read(fd, _CHUNK):
                out.write(chunk)
        return 1
    finally:
        os.close(fd)


def write_inside(root: Path, relative: str, data: str | bytes) -> None:
    """Write ``root/relative`` atomically where a sandboxed step wrote before: every directory
    on the way is opened without following a link (a planted ``lib -> /elsewhere`` fails), and
    the file is replaced by rename, never written through."""
    parts = PurePosixPath(relative).parts
    if not parts or any(part in ("", ".", "..") for part in parts) or relative.startswith("/"):
        raise ValueError(f"not a relative path inside the directory: {relative!r}")
    fd = os.open(root, _DIR)
    try:
        for part in parts[:-1]:
            inner = os.open(part, _DIR, dir_fd=fd)
            os.close(fd)
            fd = inner
        name, tmp = parts[-1], f".{parts[-1]}.{os.getpid()}.tmp"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        with os.fdopen(os.open(tmp, flags, 0o644, dir_fd=fd), "wb") as out:
            out.write(data.encode("utf-8") if isinstance(data, str) else data)
        os.replace(tmp, name, src_dir_fd=fd, dst_dir_fd=fd)
    finally:
        os.close(fd)
