"""The class index: every class in vLLM's model packages, with bases resolved across files.

Built with ``ast`` (libcst is ~8x slower to parse; it is only used for edits). Each file's facts
are cached by content hash, so re-scanning an unchanged tree re-parses nothing.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from bot.errors import BotError
from bot.tree import facts_cache
from bot.tree.extract import EXTRACT_VERSION, FileFacts, extract_file

MODEL_PACKAGES = ("vllm/model_executor/models", "vllm/models")
DECODER_ATTRIBUTE = "model"  # where a vLLM model keeps its decoder (``self.model``)
# Below this many files to parse, a process pool costs more than it saves.
_PARALLEL_THRESHOLD = 64


class ClassRef(NamedTuple):
    """A class of the index. A named tuple, not a dataclass: scans use millions of them as
    keys and set members, and a tuple's hash and equality run no Python code."""

    module: str
    name: str

    def __str__(self) -> str:
        return f"{self.module}.{self.name}"


@dataclass(frozen=True)
class External:
    """A base that lives outside the indexed packages (``nn.Module``, ``Protocol``...)."""

    dotted: str


Resolved = ClassRef | External


@dataclass
class ModuleFacts:
    module: str
    path: str  # relative to the tree root
    is_package: bool
    facts: FileFacts


@dataclass
class ClassIndex:
    root: Path
    modules: dict[str, ModuleFacts]
    problems: list[str] = field(default_factory=list)
    parsed: int = 0  # files parsed in this build (0 on a fully warm cache)
    _resolve_memo: dict[tuple[str, str], tuple[Resolved, ...]] = field(
        default_factory=dict, repr=False
    )
    _ancestors_memo: dict[ClassRef, tuple[Resolved, ...]] = field(default_factory=dict, repr=False)

    # -- lookups ---------------------------------------------------------------------------
    def class_facts(self, ref: ClassRef) -> dict[str, Any] | None:
        module = self.modules.get(ref.module)
        return module.facts["classes"].get(ref.name) if module else None

    def path_of(self, ref: ClassRef) -> str:
        return self.modules[ref.module].path

    def classes(self) -> Iterator[ClassRef]:
        for module, facts in self.modules.items():
            for name in facts.facts["classes"]:
                yield ClassRef(module, name)

    # -- resolution ------------------------------------------------------------------------
    def resolve(self, module: str, dotted: str) -> tuple[Resolved, ...]:
        """What ``dotted`` names inside ``module``: one class, several (platform variants), or
        something outside the index."""
        key = (module, dotted)
        if key not in self._resolve_memo:
            self._resolve_memo[key] = ()  # cycle guard
            self._resolve_memo[key] = tuple(dict.fromkeys(self._resolve(module, dotted, 0)))
        return self._resolve_memo[key]

    def _resolve(self, module: str, dotted: str, depth: int) -> list[Resolved]:
        if depth > 20:
            return [External(dotted)]
        head, _, rest = dotted.partition(".")
        facts = self.modules.get(module)
        if facts is None:
            return self._resolve_in_module_path(module, dotted, depth)
        data = facts.facts
        if head in data["classes"] and not rest:
            return [ClassRef(module, head)]
        results: list[Resolved] = []
        for origin, name in data["imports"].get(head, []):
            target_module = origin if name is None else f"{origin}.{name}"
            if name is not None and target_module not in self.modules:
                # `from pkg import Name` where Name is defined in (or re-exported by) pkg
                path = f"{name}.{rest}" if rest else name
                results.extend(self._resolve(origin, path, depth + 1))
            elif rest:
                results.extend(self._resolve(target_module, rest, depth + 1))
            else:
                results.append(External(target_module))
        for alias in data["aliases"].get(head, []):
            if alias != head:
                path = f"{alias}.{rest}" if rest else alias
                results.extend(self._resolve(module, path, depth + 1))
        if not results and rest and f"{module}.{head}" in self.modules:
            results.extend(self._resolve(f"{module}.{head}", rest, depth + 1))
        if not results:
            for origin, _ in data["imports"].get("*", []):
                if origin in self.modules:
                    found = self._resolve(origin, dotted, depth + 1)
                    if any(isinstance(r, ClassRef) for r in found):
                        results.extend(found)
        return results or [External(f"{module}.{dotted}")]

    def _resolve_in_module_path(self, module: str, dotted: str, depth: int) -> list[Resolved]:
        full = f"{module}.{dotted}"
        parts = full.split(".")
        for cut in range(len(parts) - 1, 0, -1):
            candidate = ".".join(parts[:cut])
            if candidate in self.modules:
                return self._resolve(candidate, ".".join(parts[cut:]), depth + 1)
        return [External(full)]

    def bases(self, ref: ClassRef) -> list[Resolved]:
        facts = self.class_facts(ref)
        if facts is None:
            return []
        resolved: list[Resolved] = []
        for base in facts["bases"]:
            if base:
                resolved.extend(self.resolve(ref.module, base))
        return resolved

    def ancestors(self, ref: ClassRef) -> tuple[Resolved, ...]:
        """Every class in ``ref``'s MRO (including itself), depth-first, without repeats."""
        if ref not in self._ancestors_memo:
            self._ancestors_memo[ref] = self._ancestors(ref)
        return self._ancestors_memo[ref]

    def _ancestors(self, ref: ClassRef) -> tuple[Resolved, ...]:
        seen: dict[Resolved, None] = {}
        stack: list[Resolved] = [ref]
        while stack:
            current = stack.pop()
            if current in seen:
                continue
            seen[current] = None
            if isinstance(current, ClassRef):
                stack.extend(reversed(self.bases(current)))
        return tuple(seen)

    def path_to(
        self, ref: ClassRef, target: ClassRef, visiting: frozenset[ClassRef] = frozenset()
    ) -> list[ClassRef] | None:
        """The chain of classes from ``ref`` up to ``target`` (both included), or None."""
        if ref == target:
            return [ref]
        if ref in visiting:
            return None
        for base in self.bases(ref):
            if isinstance(base, ClassRef):
                chain = self.path_to(base, target, visiting | {ref})
                if chain is not None:
                    return [ref, *chain]
        return None

    def find_method(self, ref: ClassRef, name: str) -> tuple[ClassRef, dict[str, Any]] | None:
        """The first definition of method ``name`` along ``ref``'s MRO."""
        for ancestor in self.ancestors(ref):
            if isinstance(ancestor, ClassRef):
                facts = self.class_facts(ancestor)
                if facts and name in facts["methods"]:
                    return ancestor, facts["methods"][name]
        return None

    def find_class_attr(self, ref: ClassRef, name: str) -> tuple[ClassRef, Any] | None:
        for ancestor in self.ancestors(ref):
            if isinstance(ancestor, ClassRef):
                facts = self.class_facts(ancestor)
                if facts and name in facts["class_attrs"]:
                    return ancestor, facts["class_attrs"][name]
        return None


# -- building -------------------------------------------------------------------------------


def require_vllm_tree(root: Path, next_step: str) -> None:
    """Refuse ``root`` unless it is the root of a vLLM checkout (the package and its models);
    ``next_step`` ends the one-line error."""
    if not root.is_dir():
        raise BotError(f"{root}: no such directory")
    if not ((root / "vllm" / "__init__.py").is_file() and (root / MODEL_PACKAGES[0]).is_dir()):
        raise BotError(f"{root} is not a vLLM tree (no {MODEL_PACKAGES[0]}); {next_step}")


def model_files(root: Path) -> list[Path]:
    """The ``.py`` files of the model packages (as ``Path.rglob`` finds them: symlinked
    folders are not entered), sorted."""
    return [root / relative for relative in model_file_names(root)]


def model_file_names(root: Path) -> list[str]:
    """:func:`model_files` as paths relative to ``root``, in the same order (a warm scan's
    walk: no Path per file)."""
    found: list[str] = []
    for package in MODEL_PACKAGES:
        _python_files(os.path.join(root, package), package, found)
    return sorted(found, key=lambda relative: relative.split("/"))


def _python_files(folder: str, relative: str, found: list[str]) -> None:
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    for entry in entries:
        try:
            if entry.is_dir() and not entry.is_symlink():
                _python_files(entry.path, f"{relative}/{entry.name}", found)
            elif entry.name.endswith(".py") and entry.is_file():
                found.append(f"{relative}/{entry.name}")
        except OSError:
            continue


def module_name(root: Path, path: Path) -> tuple[str, bool]:
    return _module_of(str(path.relative_to(root)))


def _module_of(relative: str) -> tuple[str, bool]:
    """The module a file (``relative`` to the tree, ``/``-separated) defines, and whether it is
    a package's ``__init__``."""
    parts = relative.split("/")
    parts[-1] = Path(parts[-1]).stem if parts[-1].startswith(".") else parts[-1][:-3]
    is_package = parts[-1] == "__init__"
    if is_package:
        parts = parts[:-1]
    return ".".join(parts), is_package


def build_index(root: Path, *, use_cache: bool = True) -> ClassIndex:
    root = root.resolve()
    names = model_file_names(root)
    with facts_cache.open_store("facts", EXTRACT_VERSION, _is_file_facts) as store:
        # Only this tree's entries are read; --no-cache ignores them (and reads every file)
        # but still refreshes the store (other trees' entries stay).
        keys = store.content_keys(root, [f"{root}/{name}" for name in names], reuse=use_cache)
        entries: list[tuple[str, str, bool, str]] = []
        for name, key in zip(names, keys):
            module, is_package = _module_of(name)
            entries.append((module, name, is_package, key))
        cache: dict[str, FileFacts] = store.get(e[3] for e in entries) if use_cache else {}
        missing = [e for e in entries if e[3] not in cache]
        parsed = _parse_all([(m, str(root / p), pkg) for m, p, pkg, _ in missing])
        new = {digest: facts for (_, _, _, digest), facts in zip(missing, parsed)}
        cache.update(new)
        store.put(new)
        store.record_tree(root, (e[3] for e in entries))

    index = ClassIndex(root=root, modules={}, parsed=len(missing))
    for module, rel, is_package, digest in entries:
        facts = cache[digest]
        if "error" in facts:
            index.problems.append(f"{rel}: {facts['error']}")
            continue
        index.modules[module] = ModuleFacts(module, rel, is_package, facts)
    return index


def _is_file_facts(value: object) -> bool:
    if not isinstance(value, dict):
        return False
    if "error" in value:
        return isinstance(value["error"], str)
    return all(isinstance(value.get(key), dict) for key in ("imports", "aliases", "classes"))


def _parse_one(item: tuple[str, str, bool]) -> FileFacts:
    # Workers read the file themselves: shipping 20 MB of source through pickles costs more.
    module, path, is_package = item
    try:
        return extract_file(Path(path).read_text(encoding="utf-8"), module, is_package)
    except SyntaxError as exc:
        return {"error": f"does not parse (line {exc.lineno}: {exc.msg})"}
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        return {"error": f"does not parse ({exc.__class__.__name__})"}


def _parse_all(items: list[tuple[str, str, bool]]) -> list[FileFacts]:
    # The cyclic collector is paused while parsing: ASTs hold no cycles and are freed by
    # reference counting, so its passes over millions of young nodes are pure cost.
    workers = min(os.cpu_count() or 1, 8)
    if len(items) < _PARALLEL_THRESHOLD or workers < 2:
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            return [_parse_one(item) for item in items]
        finally:
            if was_enabled:
                gc.enable()
    from concurrent.futures import ProcessPoolExecutor  # a warm scan parses nothing

    chunk = max(1, len(items) // (workers * 4))
    with ProcessPoolExecutor(max_workers=workers, initializer=gc.disable) as pool:
        return list(pool.map(_parse_one, items, chunksize=chunk))
