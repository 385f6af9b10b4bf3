"""What triage reads from a vLLM tree beyond example ids: drafts, config classes, broken claims.

All of it is read as text (``ast`` and bounded regular expressions), never imported, and cached
per tree root.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bot.errors import BotError
from bot.tree.known_models import load_known_models
from bot.tree.layout import PLATFORMS
from bot.tree.model_registry import GENERATION_CATEGORIES, load_model_registry
from bot.tree.signatures import ErrorSignature, error_signatures

if TYPE_CHECKING:
    from bot.recipes.base import ScanContext

SPECULATIVE = "speculative_decoding"
CONFIGS_DIR = "vllm/transformers_utils/configs"
_CONFIG_CLASS = re.compile(r"(?m)^class (?P<name>\w+)\([^)]{0,200}\):")
_CONFIG_IMPORT = re.compile(
    r"(?m)^from vllm\.transformers_utils\.configs(?:\.\w+)? import (\([^)]{0,2000}\)|[^\n]{0,500})"
)
_OWN = "own:"
_MODEL_TYPE_ATTR = re.compile(
    r"""(?m)^    model_type(?:\s*:\s*\w+)?\s*=\s*["'](?P<type>\w{1,80})["']"""
)


@lru_cache(maxsize=8)
def draft_archs(tree_root: Path) -> frozenset[str]:
    """Every name the tree registers as a speculative-decoding draft or MTP head: the keys and
    class names of the model registry's speculative-decoding dict and the test registry's."""
    names: set[str] = set()
    for entry in load_model_registry(tree_root).entries:
        if entry.category == SPECULATIVE:
            names.update((entry.arch, entry.class_name))
    for example in load_known_models(tree_root).examples:
        if example.category == SPECULATIVE:
            names.add(example.arch)
    return frozenset(names)


@lru_cache(maxsize=8)
def config_model_types(tree_root: Path) -> dict[str, tuple[str, ...]]:
    """``model_type`` -> generation architectures, through the tree's own config classes: a
    class in ``vllm/transformers_utils/configs`` with ``model_type = "x"`` is the config of the
    registered architectures whose model module names that class."""
    config_types: dict[str, str] = {}
    configs = tree_root / CONFIGS_DIR
    for path in sorted(configs.glob("*.py")) if configs.is_dir() else []:
        text = _read(path)
        classes = list(_CONFIG_CLASS.finditer(text))
        for number, match in enumerate(classes):
            end = classes[number + 1].start() if number + 1 < len(classes) else len(text)
            found = _MODEL_TYPE_ATTR.search(text, match.end(), end)
            if found:
                config_types[match.group("name")] = found.group("type").lower()
    if not config_types:
        return {}
    table: dict[str, list[str]] = {}
    imported: dict[str, set[str]] = {}
    for entry in load_model_registry(tree_root).entries:
        if entry.category not in GENERATION_CATEGORIES:
            continue
        if entry.module not in imported:
            lines = _CONFIG_IMPORT.findall(_module_text(tree_root, entry.module))
            imported[entry.module] = {n for line in lines for n in re.findall(r"\w+", line)}
        own_module = entry.module.rsplit(".", 1)[-1]
        for name in sorted(imported[entry.module] & config_types.keys()):
            model_type = config_types[name]
            archs = table.setdefault(model_type, [])
            if entry.arch not in archs:
                archs.append(entry.arch)
            if own_module == model_type:
                table.setdefault(f"{_OWN}{model_type}", []).append(entry.arch)
    result = {key: tuple(archs) for key, archs in table.items() if not key.startswith(_OWN)}
    for key, archs in table.items():  # a module named after the model type is its own class
        if key.startswith(_OWN):
            result[key.removeprefix(_OWN)] = tuple(dict.fromkeys(archs))
    return result


def _module_text(tree_root: Path, module: str) -> str:
    """The source of a registry module (a file, or a platform package's files together)."""
    relative = Path(*module.split("."))
    file = tree_root / relative.with_suffix(".py")
    if file.is_file():
        return _read(file)
    package = tree_root / relative
    if package.is_dir():  # a platform package: its variants import the same config
        return "\n".join(_read(p) for p in sorted(package.glob("*/*.py"))[:20])
    return ""


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def broken_claim(ctx: ScanContext, arch: str) -> str | None:
    """Why the class ``arch`` loads declares the interface but would fail when used, as the
    first recipe that contests the claim says (:meth:`bot.recipes.base.Recipe.contests_claim`),
    or None when none does."""
    from bot.recipes import RECIPES

    return next(filter(None, (r.contests_claim(ctx, arch) for r in RECIPES)), None)


@lru_cache(maxsize=8)
def loaded_class(tree_root: Path) -> dict[str, tuple[str, str]]:
    from bot.tree.model_registry import load_model_registry

    return {
        e.arch: (e.module, e.class_name)
        for e in load_model_registry(tree_root).entries
        if e.category in GENERATION_CATEGORIES
    }


@dataclass
class Tree:
    """The tree triage reads: its root, and its scan context: the caller's, or (for a caller
    with only a path) built when first asked, once per tree."""

    root: Path
    scan: ScanContext | None = None

    def context(self) -> ScanContext:
        if self.scan is None:
            self.scan = _scan_context(self.root)
        return self.scan


@lru_cache(maxsize=4)
def _scan_context(root: Path) -> ScanContext:
    from bot.scan.findings import scan_context

    return scan_context(root)


@lru_cache(maxsize=8)
def tree_signatures(tree_root: Path) -> list[ErrorSignature]:
    return error_signatures(tree_root)


@lru_cache(maxsize=8)
def generation_archs(tree_root: Path) -> frozenset[str]:
    """Architectures vLLM's model registry can serve as a target (not drafts, not poolers)."""
    from bot.tree.model_registry import load_model_registry

    registry = load_model_registry(tree_root)
    return frozenset(e.arch for e in registry.entries if e.category in GENERATION_CATEGORIES)


def append_unique(mapping: dict[str, list[Any]], key: str, value: Any) -> None:
    if key:
        bucket = mapping.setdefault(key, [])
        if value not in bucket:
            bucket.append(value)


@lru_cache(maxsize=8)
def model_type_table(tree_root: Path) -> dict[str, tuple[str, ...]]:
    """model_type -> generation architectures: the registry module named after it
    (``qwen3_next`` -> vllm...models.qwen3_next), else the architecture named after it."""
    from bot.tree.model_registry import load_model_registry

    registry = load_model_registry(tree_root)
    table: dict[str, list[str]] = {}
    for entry in registry.entries:
        if entry.category not in GENERATION_CATEGORIES:
            continue
        module = entry.module.rsplit(".", 1)[-1]
        if module in PLATFORM_PACKAGES:
            module = entry.module.rsplit(".", 2)[-2]
        append_unique(table, module.lower(), entry.arch)
    return {key: tuple(archs) for key, archs in table.items()}


# A registry module named after its platform package (or a shared one) is read as its parent.
PLATFORM_PACKAGES = PLATFORMS | {"common", "model"}


@lru_cache(maxsize=8)
def class_archs(tree_root: Path) -> dict[str, tuple[str, ...]]:
    from bot.tree.model_registry import load_model_registry

    table: dict[str, list[str]] = {}
    for entry in load_model_registry(tree_root).entries:
        if entry.category in GENERATION_CATEGORIES:
            append_unique(table, entry.class_name, entry.arch)
    return {name: tuple(archs) for name, archs in table.items()}


@lru_cache(maxsize=8)
def tree_categories(tree_root: Path) -> dict[str, str]:
    from bot.tree.model_registry import load_model_registry

    return {
        e.arch: e.category
        for e in load_model_registry(tree_root).entries
        if e.category in GENERATION_CATEGORIES
    }


def without_interface(tree: Tree, archs: list[str]) -> frozenset[str]:
    """Those of ``archs`` that lack the interface on at least one platform variant."""
    from bot.recipes.interface_status import already_fixed

    try:
        ctx = tree.context()
    except BotError:
        return frozenset()
    return frozenset(a for a in archs if not already_fixed(ctx, a))
