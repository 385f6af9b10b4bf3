"""Reading JSON we did not write (issue files, plan artifacts) without surprises.

``json.loads`` alone lets through what later breaks far from the input: a lone surrogate
(fails when written as UTF-8), NaN and Infinity, numbers of thousands of digits, and nesting
deep enough to exhaust the stack. Each becomes a one-line :class:`BotError` here.
"""

from __future__ import annotations

import dataclasses
import json
import re
import types
import typing
from typing import Any, Self, TypeVar

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
    """``data`` if every key is a field of ``cls``, every field without a default is there, and
    every value fits its annotation."""
    fields = cls.__dataclass_fields__  # type: ignore[attr-defined]
    _refuse_unknown(data, set(fields), where)
    missing = [
        name
        for name, spec in fields.items()
        if name not in data
        and spec.default is dataclasses.MISSING
        and spec.default_factory is dataclasses.MISSING
    ]
    if missing:
        raise BotError(f"{where} lacks {', '.join(f'`{name}`' for name in missing)}")
    hints = typing.get_type_hints(cls)
    for name, value in data.items():
        if not has_type(value, hints[name]):
            raise BotError(f"{where}: `{name}` must be {type_name(hints[name])}")
    return data


def _refuse_unknown(data: dict[str, Any], known: set[str], where: str) -> None:
    unknown = set(data) - known
    if unknown:
        raise BotError(f"{where} has unknown fields: {', '.join(sorted(map(str, unknown)))}")


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


# -- frozen records read from and written to JSON, field by field ----------------------------

# Field metadata: the JSON key when it is not the field's name (``class``), and whether a None
# value leaves the key out (a key only some records carry) instead of writing null.
JSON_KEY = "json_key"
OMIT_NONE = "omit_none"


def optional(**metadata: Any) -> Any:
    """A field absent from the JSON when None."""
    return dataclasses.field(default=None, metadata={OMIT_NONE: True, **metadata})


class JsonRecord:
    """Mixed into a frozen dataclass: ``from_json`` builds it from its JSON object (nested
    records, ``tuple[X, ...]`` from lists, ``X | None``) and refuses a missing, unknown or
    mistyped field with a one-line :class:`BotError` naming its path; ``to_json`` writes the
    fields in declaration order, so a record read back writes the same bytes."""

    @classmethod
    def from_json(cls, data: object, where: str) -> Self:
        return record_from_json(cls, data, where)

    def to_json(self) -> dict[str, Any]:
        return record_to_json(self)


R = TypeVar("R")


def record_from_json(cls: type[R], data: object, where: str) -> R:
    if not isinstance(data, dict):
        raise BotError(f"{where} must be an object")
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]
    _refuse_unknown(data, {_key(f) for f in fields}, where)
    hints = typing.get_type_hints(cls)
    values = {}
    for f in fields:
        key = _key(f)
        if key in data:
            values[f.name] = _read(hints[f.name], data[key], f"{where}.{key}")
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise BotError(f"{where} lacks `{key}`")
    return cls(**values)


def record_to_json(record: object) -> dict[str, Any]:
    data = {}
    for f in dataclasses.fields(record):  # type: ignore[arg-type]
        value = getattr(record, f.name)
        if value is None and f.metadata.get(OMIT_NONE):
            continue
        data[_key(f)] = _write(value)
    return data


def _key(f: dataclasses.Field[Any]) -> str:
    return f.metadata.get(JSON_KEY, f.name)


def _read(hint: Any, value: Any, where: str) -> Any:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (types.UnionType, typing.Union) and type(None) in args:
        if value is None:
            return None
        (hint,) = (a for a in args if a is not type(None))  # records use only `X | None`
        origin, args = typing.get_origin(hint), typing.get_args(hint)
    if isinstance(hint, type) and hasattr(hint, "from_json"):
        return hint.from_json(value, where)
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        if not isinstance(value, list):
            raise BotError(f"{where} must be a list")
        return tuple(_read(args[0], item, f"{where}[{i}]") for i, item in enumerate(value))
    if not has_type(value, hint):
        raise BotError(f"{where} must be {type_name(hint)}")
    return value


def _write(value: Any) -> Any:
    if hasattr(value, "to_json"):
        return value.to_json()
    if isinstance(value, tuple | list):
        return [_write(item) for item in value]
    return value
