"""Reading JSON we did not write (issue files, plan artifacts) without surprises.

``json.loads`` alone lets through what later breaks far from the input: a lone surrogate
(fails when written as UTF-8), NaN and Infinity, numbers of thousands of digits, and nesting
deep enough to exhaust the stack. Each becomes a one-line :class:`BotError` here.
"""

from __future__ import annotations

import json
import re
import types
import typing
from typing import Any

from bot.errors import BotError

MAX_DEPTH = 64
MAX_NUMBER_CHARS = 40
_SURROGATE = re.compile(r"[\ud800-\udfff]")


def loads(text: str, what: str) -> Any:
    """``text`` as JSON, or a BotError naming ``what`` and the problem."""
    try:
        data = json.loads(
            text,
            parse_int=_int,
            parse_float=_float,
            parse_constant=_no_constant,
        )
    except RecursionError:
        raise BotError(f"{what}: JSON nested too deeply") from None
    except _TooLarge:
        raise BotError(f"{what}: a number in it is too large") from None
    except ValueError as exc:
        detail = str(exc).splitlines()[0][:120]
        raise BotError(f"{what}: not valid JSON ({detail})") from None
    _check(data, what)
    return data


class _TooLarge(Exception):
    pass


def _int(token: str) -> int:
    if len(token) > MAX_NUMBER_CHARS:
        raise _TooLarge
    return int(token)


def _float(token: str) -> float:
    value = float(token)
    if len(token) > MAX_NUMBER_CHARS or value in (float("inf"), float("-inf")):
        raise _TooLarge
    return value


def _no_constant(token: str) -> Any:
    raise ValueError(f"{token} is not JSON")


def _check(data: Any, what: str) -> None:
    """No lone surrogates anywhere, no nesting deeper than ``MAX_DEPTH`` (iteratively)."""
    stack: list[tuple[Any, int]] = [(data, 0)]
    while stack:
        value, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise BotError(f"{what}: JSON nested too deeply")
        if isinstance(value, str):
            if _SURROGATE.search(value):
                raise BotError(f"{what}: a string in it holds a lone surrogate")
        elif isinstance(value, dict):
            for key, item in value.items():
                stack.append((key, depth + 1))
                stack.append((item, depth + 1))
        elif isinstance(value, list):
            stack.extend((item, depth + 1) for item in value)


def checked_fields(cls: type, data: dict[str, Any], where: str) -> dict[str, Any]:
    """``data`` if every key is a field of ``cls`` and every value fits its annotation."""
    known = set(cls.__dataclass_fields__)  # type: ignore[attr-defined]
    unknown = set(data) - known
    if unknown:
        raise BotError(f"{where} has unknown fields: {', '.join(sorted(unknown))}")
    hints = typing.get_type_hints(cls)
    for name, value in data.items():
        if not has_type(value, hints[name]):
            raise BotError(f"{where}: `{name}` must be {type_name(hints[name])}")
    return data


def has_type(value: Any, hint: Any) -> bool:
    """Whether a JSON value fits a field's annotation (str, int, list[...], dict[...], X | None)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return True
    if origin in (types.UnionType, typing.Union):
        return any(has_type(value, arg) for arg in args)
    if hint is type(None):
        return value is None
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if origin is list:
        return isinstance(value, list) and all(has_type(item, args[0]) for item in value)
    if origin is dict:
        return isinstance(value, dict) and all(
            has_type(k, args[0]) and has_type(v, args[1]) for k, v in value.items()
        )
    return isinstance(value, hint)


def type_name(hint: Any) -> str:
    if isinstance(hint, type):
        return hint.__name__
    return str(hint).replace("typing.", "").replace("NoneType", "null")
