"""A unified diff that ``git apply`` accepts."""

from __future__ import annotations

import difflib

from bot.codemods.base import CodemodRefused

_NO_NEWLINE = "\\ No newline at end of file\n"


def unified_diff(path: str, before: str, after: str) -> str:
    """``git diff``-style patch of one file at ``path`` (relative, ``/``-separated)."""
    if path.startswith("/") or ".." in path.split("/") or "\n" in path:
        raise CodemodRefused(f"not a relative path inside the tree: {path!r}")
    if before == after:
        return ""
    lines = difflib.unified_diff(
        before.splitlines(keepends=True),
        after.splitlines(keepends=True),
        fromfile=f"a/{path}",
        tofile=f"b/{path}",
    )
    out = [f"diff --git a/{path} b/{path}\n"]
    for line in lines:
        if line.endswith("\n"):
            out.append(line)
        else:
            out.append(line + "\n" + _NO_NEWLINE)
    return "".join(out)
