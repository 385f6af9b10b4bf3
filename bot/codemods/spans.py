"""Where an edit may change a file, named by what the lines are rather than by their numbers.

A recipe declares the spans when it plans the fix; propose resolves them against the file as
it is just before the edit (``before``) and refuses any change outside them
(:func:`bot.codemods.safety.changed_lines_confined`). Line numbers are 1-based, both ends
included; an empty range ``(n + 1, n)`` allows only insertions right after line ``n``.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from bot.codemods.base import CodemodRefused
from bot.codemods.safety import (
    LineRange,
    class_header_span,
    import_region_span,
    top_level_span,
)


@dataclass(frozen=True)
class Imports:
    """The module's import region (first to last module-level import)."""

    def lines(self, source: str) -> list[LineRange]:
        return [import_region_span(source)]


@dataclass(frozen=True)
class ClassHeader:
    """``class Name(...):`` with its decorators and bases, not the body."""

    name: str

    def lines(self, source: str) -> list[LineRange]:
        return [class_header_span(source, self.name)]


@dataclass(frozen=True)
class ClassBody:
    """The body of the module-level class ``name`` (methods added at its end fall inside)."""

    name: str

    def lines(self, source: str) -> list[LineRange]:
        node = _module_class(source, self.name)
        end = node.end_lineno or node.lineno
        lines = source.splitlines()
        while end < len(lines) and not lines[end].strip():
            end += 1  # the blank lines after the body: a diff may put a new method after them
        return [(node.body[0].lineno, end)]


@dataclass(frozen=True)
class TopLevel:
    """One module-level class, function or assignment (decorators included)."""

    name: str

    def lines(self, source: str) -> list[LineRange]:
        return [top_level_span(source, self.name)]


@dataclass(frozen=True)
class TopLevelIfPresent:
    """Like :class:`TopLevel` when the file defines ``name``, else no lines (a group plan's
    later members extend what an earlier member added to the same file)."""

    name: str

    def lines(self, source: str) -> list[LineRange]:
        try:
            return [top_level_span(source, self.name)]
        except CodemodRefused:
            return []


@dataclass(frozen=True)
class BetweenTopLevel:
    """Only the gaps between module-level statements (and after the last one): new functions
    or classes may be inserted there, no existing statement may change."""

    def lines(self, source: str) -> list[LineRange]:
        body = ast.parse(source).body
        gaps: list[LineRange] = []
        for statement, following in zip(body, [*body[1:], None], strict=True):
            end = statement.end_lineno or statement.lineno
            next_start = _first_line(following) if following else len(source.splitlines()) + 1
            gaps.append((end + 1, max(end, next_start - 1)))
        return gaps or [(1, 0)]


@dataclass(frozen=True)
class AfterClassBody:
    """Only insertions among the blank lines between class ``name`` and the next statement.

    Methods appended to a class body are new lines right after its last line; the line diff
    may place them after the blank lines that follow instead, which is the same text.
    """

    name: str

    def lines(self, source: str) -> list[tuple[int, int]]:
        body = ast.parse(source).body
        for node, following in zip(body, [*body[1:], None], strict=True):
            if isinstance(node, ast.ClassDef) and node.name == self.name:
                end = node.end_lineno or node.lineno
                if following is None:
                    next_start = len(source.splitlines()) + 1
                else:
                    decorators = getattr(following, "decorator_list", [])
                    next_start = min([following.lineno, *(d.lineno for d in decorators)])
                return [(line + 1, line) for line in range(end, next_start)]
        return []


@dataclass(frozen=True)
class Function:
    """Every function or method named ``name``, wherever it is defined (decorators included)."""

    name: str

    def lines(self, source: str) -> list[LineRange]:
        found = [
            (_first_line(node), node.end_lineno or node.lineno)
            for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == self.name
        ]
        if not found:
            raise CodemodRefused(f"no function {self.name}")
        return found


Span = (
    Imports
    | ClassHeader
    | ClassBody
    | AfterClassBody
    | TopLevel
    | TopLevelIfPresent
    | BetweenTopLevel
    | Function
)


def resolve(spans: tuple[Span, ...], source: str) -> list[LineRange]:
    """The line ranges of ``source`` the spans name; a span that names nothing refuses."""
    ranges: list[LineRange] = []
    for span in spans:
        ranges.extend(span.lines(source))
    return ranges


def _module_class(source: str, name: str) -> ast.ClassDef:
    for node in ast.parse(source).body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return node
    raise CodemodRefused(f"no module-level class {name}")


def _first_line(node: ast.stmt) -> int:
    decorators = getattr(node, "decorator_list", [])
    return min([node.lineno, *(d.lineno for d in decorators)])
