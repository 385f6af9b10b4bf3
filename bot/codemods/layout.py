"""Insert one item into a bracketed, comma-separated sequence while keeping its layout.

Works for any libcst node list whose items carry a ``comma`` (import aliases, call or class
arguments, dict elements). Two layouts are understood: everything on one line, and one item
per line; also all items on one line between split brackets. Anything else (several items on
some lines) is refused: we would have to guess.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import libcst as cst

from bot.codemods.base import CodemodRefused

Layout = Literal["inline", "one-per-line"]
Whitespace = cst.BaseParenthesizableWhitespace


@dataclass(frozen=True)
class Inserted:
    items: list[Any]
    opening: Whitespace | None
    closing: Whitespace | None


def _multiline(ws: object) -> bool:
    return isinstance(ws, cst.ParenthesizedWhitespace)


def _comma_ws(item: Any) -> object:
    comma = item.comma
    return comma.whitespace_after if isinstance(comma, cst.Comma) else None


def detect_layout(
    items: Sequence[Any], opening: Whitespace | None, closing: Whitespace | None
) -> Layout:
    separators = [_comma_ws(item) for item in items[:-1]]
    last = [_comma_ws(items[-1]), closing] if items else [closing]
    if not any(_multiline(ws) for ws in [opening, *separators, *last]):
        return "inline"
    if (
        items
        and _multiline(opening)
        and all(_multiline(ws) for ws in separators)
        and any(_multiline(ws) for ws in last)
    ):
        return "one-per-line"
    if (
        items
        and _multiline(opening)
        and _multiline(closing)
        and not any(_multiline(ws) for ws in [*separators, _comma_ws(items[-1])])
    ):
        # `(\n    a, b, c\n)`: the items share one line inside split brackets (ruff's form
        # when they fit the line but not next to the header); the new item joins that line.
        return "inline"
    raise CodemodRefused("the sequence mixes one-line and multi-line layout; not guessing")


def insert_item(
    items: Sequence[Any],
    index: int,
    new_item: Any,
    opening: Whitespace | None,
    closing: Whitespace | None,
) -> Inserted:
    """Insert ``new_item`` (whose comma is ignored) at ``index``."""
    layout = detect_layout(items, opening, closing)
    if layout == "inline":
        return _insert_inline(list(items), index, new_item, opening, closing)
    assert isinstance(opening, cst.ParenthesizedWhitespace)
    return _insert_one_per_line(list(items), index, new_item, opening, closing)


def _insert_inline(
    items: list[Any], index: int, new_item: Any, opening: Any, closing: Any
) -> Inserted:
    separator = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    if index < len(items):
        items.insert(index, new_item.with_changes(comma=separator))
    elif items:
        last = items[-1]
        items[-1] = last.with_changes(comma=separator)
        items.append(new_item.with_changes(comma=last.comma))
    else:
        items.append(new_item.with_changes(comma=cst.MaybeSentinel.DEFAULT))
    return Inserted(items, opening, closing)


def _split(
    old: cst.ParenthesizedWhitespace, indent: bool, item_indent: cst.SimpleWhitespace
) -> tuple[cst.ParenthesizedWhitespace, cst.ParenthesizedWhitespace]:
    """Split one line break into two: the first keeps the line's trailing comment,
    the second keeps the comment lines that lead into whatever followed."""
    left = cst.ParenthesizedWhitespace(
        first_line=old.first_line, empty_lines=[], indent=indent, last_line=item_indent
    )
    right = cst.ParenthesizedWhitespace(
        first_line=cst.TrailingWhitespace(),
        empty_lines=old.empty_lines,
        indent=old.indent,
        last_line=old.last_line,
    )
    return left, right


def _insert_one_per_line(
    items: list[Any],
    index: int,
    new_item: Any,
    opening: cst.ParenthesizedWhitespace,
    closing: Any,
) -> Inserted:
    indent, item_indent = opening.indent, opening.last_line
    if index == 0:
        opening, after_new = _split(opening, indent, item_indent)
        items.insert(0, new_item.with_changes(comma=cst.Comma(whitespace_after=after_new)))
        return Inserted(items, opening, closing)
    if index < len(items):
        before = items[index - 1]
        left, after_new = _split(before.comma.whitespace_after, indent, item_indent)
        items[index - 1] = before.with_changes(
            comma=before.comma.with_changes(whitespace_after=left)
        )
        items.insert(index, new_item.with_changes(comma=cst.Comma(whitespace_after=after_new)))
        return Inserted(items, opening, closing)
    last = items[-1]
    last_ws = _comma_ws(last)
    if isinstance(last_ws, cst.ParenthesizedWhitespace):
        left, after_new = _split(last_ws, indent, item_indent)
        items[-1] = last.with_changes(comma=last.comma.with_changes(whitespace_after=left))
        items.append(new_item.with_changes(comma=cst.Comma(whitespace_after=after_new)))
        return Inserted(items, opening, closing)
    # The line break before the closing bracket lives on the bracket itself.
    left, closing = _split(closing, indent, item_indent)
    if isinstance(last.comma, cst.Comma):
        items[-1] = last.with_changes(comma=last.comma.with_changes(whitespace_after=left))
        items.append(new_item.with_changes(comma=cst.Comma(whitespace_after=last_ws)))
    else:
        items[-1] = last.with_changes(comma=cst.Comma(whitespace_after=left))
        items.append(new_item.with_changes(comma=cst.MaybeSentinel.DEFAULT))
    return Inserted(items, opening, closing)


def insert_element(container: Any, index: int, element: Any, opening: str, closing: str) -> Any:
    """``container`` (a ``Dict`` or ``List``) with ``element`` at ``index``, layout kept.

    ``opening``/``closing`` name its bracket attributes (``lbrace``/``rbrace``, ``lbracket``/...).
    """
    left, right = getattr(container, opening), getattr(container, closing)
    inserted = insert_item(
        container.elements, index, element, left.whitespace_after, right.whitespace_before
    )
    return container.with_changes(
        elements=inserted.items,
        **{
            opening: left.with_changes(whitespace_after=inserted.opening),
            closing: right.with_changes(whitespace_before=inserted.closing),
        },
    )
