"""vLLM's model registry (vllm/model_executor/models/registry.py), read with ``ast``.

Each ``_<CATEGORY>_MODELS = {"Arch": ("module", "ClassName"), ...}`` dict maps an architecture
name to the module and class vLLM loads for it. A module is either a name relative to
``vllm.model_executor.models`` (``"qwen3_next"``) or an absolute dotted path into a platform
package (``"vllm.models.beam"``), whose ``__init__`` picks a variant at import time.
"""

from __future__ import annotations

import ast
import re
from dataclasses import astuple, dataclass
from pathlib import Path

from bot.errors import BotError
from bot.tree import facts_cache
from bot.tree.layout import REGISTRY_PATH

MODELS_PACKAGE = "vllm.model_executor.models"
_DICT_NAME = re.compile(r"^_([A-Z_]+)_MODELS$")
# Dicts that merely re-list others, or list models that are no longer (or not yet) in the tree.
_NOT_CATEGORIES = {"VLLM", "PREVIOUSLY_SUPPORTED", "OOT_SUPPORTED"}
_SECTION = re.compile(r"^\s*#\s*\[(?P<name>[^\]]+)\]\s*$")

# Bumped whenever what load_model_registry reads changes; older cache entries are then ignored.
_CACHE_VERSION = 1

# Categories whose models generate text and can be speculative-decoding targets.
GENERATION_CATEGORIES = frozenset({"text_generation", "multimodal"})


@dataclass(frozen=True)
class RegistryEntry:
    arch: str
    module: str  # absolute dotted module path
    class_name: str
    category: str  # e.g. "text_generation", "multimodal", "embedding", "speculative_decoding"
    section: str | None  # the `# [...]` comment above the entry, e.g. "Decoder-only"
    line: int


@dataclass(frozen=True)
class ModelRegistry:
    path: Path
    entries: tuple[RegistryEntry, ...]

    def by_arch(self, arch: str) -> list[RegistryEntry]:
        return [e for e in self.entries if e.arch == arch]

    def archs_for_class(self, module: str, class_name: str) -> list[RegistryEntry]:
        return [e for e in self.entries if e.module == module and e.class_name == class_name]


def load_model_registry(root: Path) -> ModelRegistry:
    """The tree's registry, read from the user cache when this registry file was seen before."""
    path = root / REGISTRY_PATH
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise BotError(f"cannot read vLLM's model registry {REGISTRY_PATH}: {exc}") from None
    # the path is part of the key: a syntax error's message names it
    content = str(path).encode() + b"\0" + data
    plain = facts_cache.remembered(
        "registry", _CACHE_VERSION, root, content, lambda: _read_registry(path, data), _is_plain
    )
    return ModelRegistry(path=path, entries=tuple(RegistryEntry(*e) for e in plain))


def _is_plain(value: object) -> bool:
    return isinstance(value, list) and all(
        isinstance(e, tuple | list) and len(e) == len(RegistryEntry.__dataclass_fields__)
        for e in value
    )


def _read_registry(path: Path, data: bytes) -> list[tuple[object, ...]]:
    try:
        source = facts_cache.decoded(data)
        tree = ast.parse(source, filename=str(path))
    except (SyntaxError, UnicodeDecodeError) as exc:
        raise BotError(f"cannot read vLLM's model registry {REGISTRY_PATH}: {exc}") from None
    lines = source.splitlines()
    entries: list[RegistryEntry] = []
    for node in tree.body:
        target, value = _assignment(node)
        if target is None or not isinstance(value, ast.Dict):
            continue
        match = _DICT_NAME.match(target)
        if not match or match.group(1) in _NOT_CATEGORIES:
            continue
        category = match.group(1).lower()
        entries.extend(_dict_entries(value, category, lines))
    if not entries:
        raise BotError(f"{REGISTRY_PATH} lists no models; is this a vLLM tree?")
    return [astuple(entry) for entry in entries]


def _assignment(node: ast.stmt) -> tuple[str | None, ast.expr | None]:
    if isinstance(node, ast.Assign) and len(node.targets) == 1:
        target = node.targets[0]
        if isinstance(target, ast.Name):
            return target.id, node.value
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return node.target.id, node.value
    return None, None


def _dict_entries(node: ast.Dict, category: str, lines: list[str]) -> list[RegistryEntry]:
    entries = []
    for key, value in zip(node.keys, node.values):
        if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
            continue
        if not (isinstance(value, ast.Tuple) and len(value.elts) == 2):
            continue
        module, class_name = (e.value if isinstance(e, ast.Constant) else None for e in value.elts)
        if not (isinstance(module, str) and isinstance(class_name, str)):
            continue
        entries.append(
            RegistryEntry(
                arch=key.value,
                module=absolute_module(module),
                class_name=class_name,
                category=category,
                section=_section_above(lines, key.lineno, node.lineno),
                line=key.lineno,
            )
        )
    return entries


def absolute_module(module: str) -> str:
    return module if module.startswith("vllm.") else f"{MODELS_PACKAGE}.{module}"


def section_name(comment: str) -> str | None:
    """``DFlash`` for a ``# [DFlash]`` comment line: vLLM's registries group entries so."""
    match = _SECTION.match(comment)
    return match.group("name").strip() if match else None


def _section_above(lines: list[str], line: int, dict_line: int) -> str | None:
    for index in range(line - 2, dict_line - 1, -1):
        if name := section_name(lines[index]):
            return name
    return None
