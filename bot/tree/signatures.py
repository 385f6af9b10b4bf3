"""The error messages a vLLM tree raises when a model lacks the EAGLE-3 interface.

The wording differs between releases, so it is read from the tree's own ``raise`` sites rather
than hard-coded. Only the literal parts of a message are kept: implicit concatenation is joined,
and an f-string contributes its constant pieces (its placeholders end the prefix).
"""

from __future__ import annotations

import ast
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bot.errors import BotError
from bot.tree import facts_cache

_MARKERS = ("EAGLE3", "Eagle3")
# Bumped whenever what signatures_in_source extracts changes; older cache entries are ignored.
_CACHE_VERSION = 1
# "does not support EAGLE3 ..." yes; "Unsupported model_type ... for Eagle3 speculator" no: that
# rejects a draft config, not a target model.
_ABOUT_SUPPORT = re.compile(r"\b(?:not|n't|no longer)\s+support\b.*\b(?:EAGLE3|Eagle3)\b", re.I)


@dataclass(frozen=True)
class ErrorSignature:
    message_prefix: str  # the literal text up to the first f-string placeholder
    path: str  # relative to the tree root, POSIX separators
    line: int
    fragments: tuple[str, ...] = ()  # every literal piece, in order (one unless an f-string)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["fragments"] = list(self.fragments)
        return data

    @property
    def location(self) -> str:
        return f"{self.path}:{self.line}"


def error_signatures(tree_root: Path) -> list[ErrorSignature]:
    """Every ``raise`` in ``vllm/`` whose message says a model does not support EAGLE3."""
    package = tree_root / "vllm"
    if not package.is_dir():
        raise BotError(f"{tree_root} has no vllm/ package; is it a vLLM tree?")
    marked: list[tuple[str, str, bytes]] = []  # (key, relative path, text) of marker files
    for path in sorted(package.rglob("*.py")):
        try:
            data = path.read_bytes()
        except OSError:
            continue
        # Parsing is the slow part; almost no file mentions the marker at all.
        if not any(marker.encode() in data for marker in _MARKERS):
            continue
        relative = path.relative_to(tree_root).as_posix()
        marked.append((f"{facts_cache.content_key(data)}:{relative}", relative, data))
    found: list[ErrorSignature] = []
    with facts_cache.open_store("signatures", _CACHE_VERSION, _is_signature_list) as store:
        cache = store.get(key for key, _, _ in marked)
        new: dict[str, list[dict[str, Any]]] = {}
        for key, relative, data in marked:
            if key not in cache:
                try:
                    source = data.decode("utf-8")
                except UnicodeDecodeError:
                    continue
                cache[key] = new[key] = [
                    s.to_dict() for s in signatures_in_source(source, relative)
                ]
            found.extend(_from_dict(item) for item in cache[key])
        store.put(new)
        store.record_tree(tree_root, (key for key, _, _ in marked))
    return found


def _is_signature_list(value: object) -> bool:
    fields = set(ErrorSignature.__dataclass_fields__)
    return isinstance(value, list) and all(
        isinstance(item, dict)
        and set(item) == fields
        and isinstance(item.get("fragments"), list | tuple)
        for item in value
    )


def _from_dict(data: dict[str, Any]) -> ErrorSignature:
    return ErrorSignature(**{**data, "fragments": tuple(data["fragments"])})


def signatures_in_source(source: str, relative_path: str) -> list[ErrorSignature]:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Raise) or node.exc is None:
            continue
        fragments = _message_fragments(node.exc)
        if not fragments or not _ABOUT_SUPPORT.search(" ".join(fragments)):
            continue
        found.append(
            ErrorSignature(
                message_prefix=fragments[0],
                path=relative_path,
                line=node.lineno,
                fragments=tuple(fragments),
            )
        )
    return found


def _message_fragments(exc: ast.expr) -> list[str]:
    """The literal pieces of the first argument of ``raise SomeError(<message>, ...)``."""
    if not isinstance(exc, ast.Call) or not exc.args:
        return []
    message = exc.args[0]
    if isinstance(message, ast.Constant) and isinstance(message.value, str):
        return [message.value] if message.value.strip() else []
    if isinstance(message, ast.JoinedStr):
        return _joined_fragments(message)
    if isinstance(message, ast.BinOp) and isinstance(message.op, ast.Add):
        # "a" + f"b{x}" + "c": flatten left to right.
        return _merge(_message_fragments_of(message.left) + _message_fragments_of(message.right))
    return []


def _message_fragments_of(node: ast.expr) -> list[str | None]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.JoinedStr):
        return _joined_pieces(node)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _message_fragments_of(node.left) + _message_fragments_of(node.right)
    return [None]


def _joined_pieces(node: ast.JoinedStr) -> list[str | None]:
    """Constants as text, placeholders as ``None`` (a break between fragments)."""
    pieces: list[str | None] = []
    for value in node.values:
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            pieces.append(value.value)
        else:
            pieces.append(None)
    return pieces


def _joined_fragments(node: ast.JoinedStr) -> list[str]:
    return _merge(_joined_pieces(node))


def _merge(pieces: list[str | None]) -> list[str]:
    """Join adjacent literal pieces; a placeholder (``None``) starts a new fragment."""
    fragments: list[str] = []
    current = ""
    for piece in pieces:
        if piece is None:
            if current.strip():
                fragments.append(current)
            current = ""
        else:
            current += piece
    if current.strip():
        fragments.append(current)
    return fragments


# The engine harness ends an error with where it was raised: "(at vllm/...py:LINE" (the frame
# in vLLM's package that raised it, bot/verify/harness/bot_smoke.py).
RAISED_AT = re.compile(r"\(at ((?:vllm|[\w.-]+)/[\w./-]+\.py):(\d+)")


def raised_site(error: str) -> str | None:
    """``path:line`` the harness recorded for ``error``'s raise, or None when it names none."""
    found = RAISED_AT.search(error)
    return f"{found[1]}:{found[2]}" if found else None


def match_signature(text: str, signatures: list[ErrorSignature]) -> ErrorSignature | None:
    """The most specific signature whose literal fragments all occur in ``text``, in order."""
    best: ErrorSignature | None = None
    best_length = 0
    for signature in signatures:
        fragments = signature.fragments or (signature.message_prefix,)
        if _occurs_in_order(text, [f.strip() for f in fragments]):
            length = sum(len(f) for f in fragments)
            if length > best_length:
                best, best_length = signature, length
    return best


def _occurs_in_order(text: str, fragments: list[str]) -> bool:
    position = 0
    for fragment in fragments:
        found = text.find(fragment, position)
        if found < 0:
            return False
        position = found + len(fragment)
    return True
