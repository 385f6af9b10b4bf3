"""What a vLLM tree itself knows about which Hugging Face models each architecture serves.

Two sources, both read as text (never imported):

- ``tests/models/registry.py``: ``_<CATEGORY>_EXAMPLE_MODELS = {"Arch": _HfExamplesInfo("<id>",
  extras={...}, min_transformers_version=..., ...)}``, parsed with ``ast``;
- ``docs/models/supported_models.md``: tables with an ``Architecture`` column (names in
  backticks) and an ``Example HF Models`` column.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from bot.errors import BotError
from bot.tree.layout import TEST_REGISTRY_PATH
from bot.tree.model_registry import section_name

SUPPORTED_MODELS_DOC = "docs/models/supported_models.md"
_EXAMPLES_CALL = "_HfExamplesInfo"
_DICT_NAME = re.compile(r"^_(?P<category>[A-Z_]+?)(?:_EXAMPLE)?_MODELS$")
_BACKTICKED = re.compile(r"`([^`]+)`")
_ARCH_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_HF_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")

# Example categories whose architectures generate text, so can be speculative-decoding targets.
GENERATION_CATEGORIES = frozenset({"text_generation", "multimodal"})


@dataclass(frozen=True)
class ExampleEntry:
    """One ``"Arch": _HfExamplesInfo(...)`` entry of the test registry."""

    arch: str
    category: str  # from the dict name: "text_generation", "speculative_decoding", ...
    default: str  # the first positional argument: an HF id (sometimes a local path or "")
    extras: dict[str, str] = field(default_factory=dict)
    kwargs: dict[str, Any] = field(default_factory=dict)  # literal keyword args, extras excluded
    section: str | None = None  # the `# [...]` comment above the entry
    line: int = 0
    comment_lines: tuple[str, ...] = ()  # comment lines right above the entry

    @property
    def hf_ids(self) -> list[str]:
        return [i for i in (self.default, *self.extras.values()) if i]


@dataclass(frozen=True)
class KnownModels:
    examples: tuple[ExampleEntry, ...]
    doc_examples: dict[str, tuple[str, ...]]  # arch -> HF ids from supported_models.md

    def entries(self, arch: str) -> list[ExampleEntry]:
        return [e for e in self.examples if e.arch == arch]

    def entry_kwargs(self, arch: str) -> dict[str, Any]:
        """Keyword args of the arch's first generation entry (e.g. ``min_transformers_version``)."""
        entries = self.entries(arch)
        generation = [e for e in entries if e.category in GENERATION_CATEGORIES]
        chosen = (generation or entries)[:1]
        return dict(chosen[0].kwargs) if chosen else {}

    def hf_ids(self, arch: str) -> list[str]:
        """Every HF id the tree associates with ``arch`` (test registry first, then docs)."""
        ids: list[str] = []
        for entry in self.entries(arch):
            if entry.category in GENERATION_CATEGORIES or entry.category == "embedding":
                ids.extend(entry.hf_ids)
        ids.extend(self.doc_examples.get(arch, ()))
        return list(dict.fromkeys(i for i in ids if _HF_ID.match(i)))

    def generation_archs(self) -> list[str]:
        archs = [e.arch for e in self.examples if e.category in GENERATION_CATEGORIES]
        return list(dict.fromkeys([*archs, *self.doc_examples]))

    def id_to_archs(self) -> dict[str, list[str]]:
        """HF id (as written) -> generation architectures that list it. Where the test registry
        lists an id (default or ``extras``), its classes are the ones that load it: the docs'
        tables group models by family and lag behind (`MiniCPMV` lists `MiniCPM-V-4_6`, which
        the test registry gives its own class)."""
        tested: dict[str, list[str]] = {}
        for entry in self.examples:
            if entry.category in GENERATION_CATEGORIES:
                for hf_id in entry.hf_ids:
                    _add_unique(tested.setdefault(hf_id, []), entry.arch)
        ids: dict[str, list[str]] = {}  # arch -> ids, as hf_ids() gives them, in one pass
        for entry in self.examples:
            if entry.category in GENERATION_CATEGORIES or entry.category == "embedding":
                ids.setdefault(entry.arch, []).extend(entry.hf_ids)
        mapping: dict[str, list[str]] = {}
        for arch in self.generation_archs():
            for hf_id in [*ids.get(arch, ()), *self.doc_examples.get(arch, ())]:
                if not _HF_ID.match(hf_id) or (hf_id in tested and arch not in tested[hf_id]):
                    continue
                _add_unique(mapping.setdefault(hf_id, []), arch)
        return mapping


def _add_unique(items: list[str], item: str) -> None:
    if item not in items:
        items.append(item)


def load_known_models(tree_root: Path) -> KnownModels:
    return _load_cached(tree_root.resolve())


def entry_kwargs(tree_root: Path, arch: str) -> dict[str, Any]:
    return load_known_models(tree_root).entry_kwargs(arch)


@lru_cache(maxsize=8)
def _load_cached(tree_root: Path) -> KnownModels:
    registry = tree_root / TEST_REGISTRY_PATH
    try:
        source = registry.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise BotError(f"cannot read {TEST_REGISTRY_PATH}: {exc}") from None
    doc = tree_root / SUPPORTED_MODELS_DOC
    doc_text = doc.read_text(encoding="utf-8", errors="replace") if doc.is_file() else ""
    return KnownModels(
        examples=tuple(parse_test_registry(source)), doc_examples=parse_supported_models(doc_text)
    )


def parse_test_registry(source: str) -> list[ExampleEntry]:
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise BotError(f"{TEST_REGISTRY_PATH} does not parse: line {exc.lineno}") from None
    lines = source.splitlines()
    entries: list[ExampleEntry] = []
    for node in tree.body:
        if not (isinstance(node, ast.Assign | ast.AnnAssign) and isinstance(node.value, ast.Dict)):
            continue
        target = node.targets[0] if isinstance(node, ast.Assign) else node.target
        match = _DICT_NAME.match(target.id) if isinstance(target, ast.Name) else None
        if match:
            category = match.group("category").lower()
            entries.extend(_dict_entries(node.value, category, lines))
    return entries


def _dict_entries(node: ast.Dict, category: str, lines: list[str]) -> list[ExampleEntry]:
    entries = []
    section: str | None = None
    previous_end = node.lineno
    for key, value in zip(node.keys, node.values, strict=True):
        if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
            continue
        comments = _comments_between(lines, previous_end, key.lineno)
        previous_end = value.end_lineno or key.lineno
        for comment in comments:
            section = section_name("# " + comment) or section
        call = value
        if not (isinstance(call, ast.Call) and _call_name(call) == _EXAMPLES_CALL):
            continue
        default = _literal(call.args[0]) if call.args else None
        kwargs: dict[str, Any] = {}
        extras: dict[str, str] = {}
        for keyword in call.keywords:
            if keyword.arg is None:
                continue
            literal = _literal(keyword.value)
            if literal is _NOT_LITERAL:
                continue
            if keyword.arg == "extras" and isinstance(literal, dict):
                extras = {str(k): str(v) for k, v in literal.items() if isinstance(v, str)}
            else:
                kwargs[keyword.arg] = literal
        entries.append(
            ExampleEntry(
                arch=key.value,
                category=category,
                default=default if isinstance(default, str) else "",
                extras=extras,
                kwargs=kwargs,
                section=section,
                line=key.lineno,
                comment_lines=tuple(comments),
            )
        )
    return entries


def _comments_between(lines: list[str], after: int, before: int) -> list[str]:
    """Full-line comments strictly between 1-based lines ``after`` and ``before``."""
    found = []
    for text in lines[after : before - 1]:
        stripped = text.strip()
        if stripped.startswith("#"):
            found.append(stripped.lstrip("#").strip())
    return found


def _call_name(call: ast.Call) -> str | None:
    if isinstance(call.func, ast.Name):
        return call.func.id
    if isinstance(call.func, ast.Attribute):
        return call.func.attr
    return None


_NOT_LITERAL = object()


def _literal(node: ast.expr) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return _NOT_LITERAL


def parse_supported_models(text: str) -> dict[str, tuple[str, ...]]:
    """arch -> HF example ids from every markdown table with both needed columns."""
    found: dict[str, list[str]] = {}
    arch_column: int | None = None
    examples_column: int | None = None
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped.startswith("|"):
            arch_column = examples_column = None
            continue
        cells = [c.strip() for c in stripped.strip("|").split("|")]
        if "Architecture" in cells:
            arch_column = cells.index("Architecture")
            examples_column = next(
                (i for i, c in enumerate(cells) if c.startswith("Example HF Models")), None
            )
            continue
        if arch_column is None or examples_column is None or len(cells) <= examples_column:
            continue
        archs = [a for a in _BACKTICKED.findall(cells[arch_column]) if _ARCH_NAME.match(a)]
        ids = [i for i in _BACKTICKED.findall(cells[examples_column]) if _HF_ID.match(i)]
        for arch in archs:
            bucket = found.setdefault(arch, [])
            bucket.extend(i for i in ids if i not in bucket)
    return {arch: tuple(ids) for arch, ids in found.items()}
