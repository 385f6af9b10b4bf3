"""Do-no-harm checks around a codemod: faithful parsing, confined diffs, ruff-clean edits.

ruff runs with the edited tree as its working directory and the file's path in the tree as
``--stdin-filename``, so the tree's own ruff settings apply. Only source text we produced from
the tree goes through it, never issue text.
"""

from __future__ import annotations

import ast
import difflib
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import libcst as cst

from bot.codemods.base import CodemodRefused
from bot.errors import BotError
from bot.subprocess_env import minimal_env

LineRange = tuple[int, int]  # 1-based, both ends included


def check_round_trip(source: str, path: str) -> None:
    """Refuse a file libcst cannot reproduce byte for byte (e.g. libcst#1457, ``except X :``)."""
    try:
        code = cst.parse_module(source).code
    except cst.ParserSyntaxError as error:
        raise CodemodRefused(f"{path}: libcst cannot parse line {error.raw_line}") from None
    if code != source:
        line = _first_differing_line(source, code)
        raise CodemodRefused(
            f"{path}: libcst does not reproduce line {line} exactly; refusing to edit this file"
        )


def _first_differing_line(left: str, right: str) -> int:
    for number, (a, b) in enumerate(
        zip(left.splitlines(keepends=True), right.splitlines(keepends=True), strict=False), 1
    ):
        if a != b:
            return number
    return min(len(left.splitlines()), len(right.splitlines())) + 1


def changed_line_ranges(before: str, after: str) -> list[LineRange]:
    """The lines of ``after`` that differ from ``before`` (a pure deletion marks its neighbour)."""
    matcher = difflib.SequenceMatcher(
        None, before.splitlines(keepends=True), after.splitlines(keepends=True), autojunk=False
    )
    after_count = len(after.splitlines())
    ranges = []
    for tag, _, _, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        if j2 > j1:
            ranges.append((j1 + 1, j2))
        else:
            anchor = max(1, min(j1, after_count))
            ranges.append((anchor, anchor))
    return ranges


def changed_lines_confined(before: str, after: str, allowed: Sequence[LineRange]) -> None:
    """Refuse unless every change replaces lines of ``before`` inside ``allowed`` or inserts
    lines directly next to or inside one of those ranges (line numbers of ``before``)."""
    matcher = difflib.SequenceMatcher(
        None, before.splitlines(keepends=True), after.splitlines(keepends=True), autojunk=False
    )
    for tag, i1, i2, _, _ in matcher.get_opcodes():
        if tag == "equal":
            continue
        if tag == "insert":
            inside = any(start - 1 <= i1 <= end for start, end in allowed)
        else:
            inside = any(start <= i1 + 1 and i2 <= end for start, end in allowed)
        if not inside:
            raise CodemodRefused(
                f"the edit changes line {i1 + 1}, outside the intended lines; not applying it"
            )


def top_level_span(source: str, name: str) -> LineRange:
    """Lines of the module-level class, function or assignment called ``name``."""
    for node in ast.parse(source).body:
        names: list[str] = []
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            names = [node.name]
        elif isinstance(node, ast.Assign):
            names = [t.id for t in node.targets if isinstance(t, ast.Name)]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names = [node.target.id]
        if name in names:
            decorators = getattr(node, "decorator_list", [])
            start = min([node.lineno, *(d.lineno for d in decorators)])
            return start, node.end_lineno or node.lineno
    raise CodemodRefused(f"no module-level definition of {name}")


def class_header_span(source: str, class_name: str) -> LineRange:
    """From ``class`` (or its first decorator) to the line before the body starts."""
    start, _ = top_level_span(source, class_name)
    node = next(
        n for n in ast.parse(source).body if isinstance(n, ast.ClassDef) and n.name == class_name
    )
    return start, max(node.lineno, node.body[0].lineno - 1)


def import_region_span(source: str) -> LineRange:
    """From the first to the last module-level import statement."""
    imports = [
        node for node in ast.parse(source).body if isinstance(node, ast.Import | ast.ImportFrom)
    ]
    if not imports:
        return 1, 1
    return imports[0].lineno, max(node.end_lineno or node.lineno for node in imports)


def ruff_binary() -> str:
    beside_python = Path(sys.executable).parent / "ruff"
    if beside_python.is_file():
        return str(beside_python)
    found = shutil.which("ruff")
    if found is None:
        raise BotError("the ruff executable is not installed next to this Python or on PATH")
    return found


def check_relpath(relpath: str) -> None:
    parts = relpath.split("/")
    if relpath.startswith("/") or ".." in parts or not relpath.endswith(".py"):
        raise CodemodRefused(f"not a Python file path inside the tree: {relpath!r}")


def _ruff_format(source: str, tree_root: Path, relpath: str, extra: list[str]) -> str:
    check_relpath(relpath)
    command = [ruff_binary(), "format", "--no-cache", *extra, "--stdin-filename", relpath]
    result = subprocess.run(
        command,
        cwd=tree_root,
        env=minimal_env(),
        input=source,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    if result.returncode != 0:
        reason = (result.stderr.strip().splitlines() or ["no output"])[0]
        raise CodemodRefused(f"ruff format failed on {relpath}: {reason}")
    return result.stdout


def format_touched(before: str, after: str, tree_root: Path, relpath: str) -> str:
    """``after`` with ruff's formatting applied to the lines our edit touched, and only those.

    ``ruff format --range`` widens to the whole enclosing statement (a class header drags in
    the class body), so we format the file and keep only the hunks that overlap our edit.
    """
    touched = changed_line_ranges(before, after)
    if not touched:
        return after
    formatted = _ruff_format(after, tree_root, relpath, [])
    old_lines = after.splitlines(keepends=True)
    new_lines = formatted.splitlines(keepends=True)
    matcher = difflib.SequenceMatcher(None, old_lines, new_lines, autojunk=False)
    kept: list[str] = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            kept.extend(old_lines[i1:i2])
            continue
        for (g1, g2), (h1, h2) in _aligned_groups(old_lines, i1, i2, new_lines, j1, j2):
            kept.extend(new_lines[h1:h2] if _overlaps(g1, g2, touched) else old_lines[g1:g2])
    result = "".join(kept)
    try:
        ast.parse(result)
    except SyntaxError:
        raise CodemodRefused(
            f"{relpath}: formatting only the edited lines broke the file"
        ) from None
    return result


def _aligned_groups(
    old: list[str], i1: int, i2: int, new: list[str], j1: int, j2: int
) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """Split one changed block into the smallest pieces whose non-blank characters match.

    difflib merges adjacent changed lines (an edited class header and an untouched, badly
    spaced first body line) into one block; this separates them again.
    """
    groups = []
    start_i, start_j, i, j = i1, j1, i1, j1
    seen_old = seen_new = ""
    while i < i2 or j < j2:
        if j >= j2 or (i < i2 and len(seen_old) <= len(seen_new)):
            seen_old += "".join(old[i].split())
            i += 1
        else:
            seen_new += "".join(new[j].split())
            j += 1
        if seen_old == seen_new and i > start_i and j > start_j:
            groups.append(((start_i, i), (start_j, j)))
            start_i, start_j, seen_old, seen_new = i, j, "", ""
    if start_i < i2 or start_j < j2:
        groups.append(((start_i, i2), (start_j, j2)))
    return groups


def _overlaps(i1: int, i2: int, ranges: Sequence[LineRange]) -> bool:
    first, last = i1 + 1, max(i1 + 1, i2)
    return any(start <= last and first <= end for start, end in ranges)


def check_ruff_clean(before: str, after: str, tree_root: Path, relpath: str) -> None:
    """Refuse if ``ruff format`` under the tree's settings would change a line we touched.

    Lines we did not touch may be unformatted already; they are not our business.
    """
    touched = changed_line_ranges(before, after)
    if not touched:
        return
    formatted = _ruff_format(after, tree_root, relpath, [])
    matcher = difflib.SequenceMatcher(
        None, after.splitlines(keepends=True), formatted.splitlines(keepends=True), autojunk=False
    )
    for tag, i1, i2, _, _ in matcher.get_opcodes():
        if tag == "equal":
            continue
        if _overlaps(i1, i2, touched):
            raise CodemodRefused(
                f"{relpath}: ruff format would still change edited line {i1 + 1}; not applying it"
            )
