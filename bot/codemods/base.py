"""What every codemod shares: the refusal error, the case record, and parsing."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import libcst as cst

from bot.errors import BotError

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_DOTTED = re.compile(r"^\.*[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*$")


class CodemodRefused(BotError):
    """A codemod chose to make no change rather than risk a wrong one."""


@dataclass(frozen=True)
class Case:
    """One before/after example a codemod carries next to its code.

    ``after=None`` means "no change": the output must equal ``before`` byte for byte.
    ``refuses`` is a fragment of the expected ``CodemodRefused`` message instead.
    """

    name: str
    apply: Callable[[str], str]
    before: str
    after: str | None = None
    refuses: str | None = None


def parse(source: str) -> cst.Module:
    try:
        return cst.parse_module(source)
    except cst.ParserSyntaxError as error:
        raise CodemodRefused(
            f"source does not parse (line {error.raw_line}): refusing to edit it"
        ) from None


def shown(value: object, limit: int = 80) -> str:
    """``repr`` of a caller's value, cut short: it may come from hostile issue text."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def require_identifier(value: str, what: str) -> str:
    if not isinstance(value, str) or not _IDENTIFIER.match(value):
        raise CodemodRefused(f"{what} is not a Python identifier: {shown(value)}")
    return value


def require_dotted(value: str, what: str) -> str:
    if not isinstance(value, str) or not _DOTTED.match(value):
        raise CodemodRefused(f"{what} is not a dotted module name: {shown(value)}")
    return value
